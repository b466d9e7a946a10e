/* Loading an optional library on first use; see dynload.h. */
#include "io/dynload.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Binds every symbol of @p lib from @p h; 0, or -ENOENT with lib->why set. */
static int bind_all(sp_dynlib *lib, void *h)
{
	for (size_t i = 0; i < lib->nsyms; i++) {
		void *sym = dlsym(h, lib->syms[i].name);
		if (!sym) {
			snprintf(lib->why, sizeof(lib->why), "%s has no %s", lib->soname,
			         lib->syms[i].name);
			return -ENOENT;
		}
		/* POSIX: a data pointer from dlsym holds a function. */
		memcpy(lib->syms[i].fn, &sym, lib->syms[i].fn_size);
	}
	return 0;
}

static void load(sp_dynlib *lib)
{
	void *h = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(lib->why, sizeof(lib->why), "%s", e ? e : lib->soname);
		lib->state = -1;
		return;
	}
	if (bind_all(lib, h) != 0) {
		for (size_t i = 0; i < lib->nsyms; i++)
			memset(lib->syms[i].fn, 0, lib->syms[i].fn_size);
		dlclose(h);
		lib->state = -1;
		return;
	}
	lib->state = 1;
	if (lib->loaded)
		lib->loaded();
}

int sp_dynlib_load(sp_dynlib *lib)
{
	pthread_mutex_lock(&lib->lock);
	if (lib->state == 0)
		load(lib);
	int state = lib->state;
	pthread_mutex_unlock(&lib->lock);
	return state == 1 ? 0 : -ENOENT;
}
