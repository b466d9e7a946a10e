/* Optional system libraries loaded at their first use (dlopen) instead of
 * linked: a linked library and everything it needs is loaded at the start
 * of every program built with ours, used or not. */
#ifndef SP_IO_DYNLOAD_H
#define SP_IO_DYNLOAD_H

#include <pthread.h>
#include <stddef.h>

/* One function of the library: its name and the function pointer to set. */
typedef struct sp_dynsym {
	const char *name;
	void *fn;       /* Address of a function pointer. */
	size_t fn_size; /* sizeof that pointer. */
} sp_dynsym;

#define SP_DYNSYM(ptr, name)                                                                       \
	{                                                                                          \
		(name), &(ptr), sizeof(ptr)                                                        \
	}

/* A library loaded once per process, on the first sp_dynlib_load. */
typedef struct sp_dynlib {
	const char *soname;
	const sp_dynsym *syms;
	size_t nsyms;
	/* Run once, after every symbol is bound (NULL for none): a library's
	 * own global setup. */
	void (*loaded)(void);
	pthread_mutex_t lock;
	int state;     /* 0: not tried, 1: loaded, -1: not loadable. */
	char why[256]; /* Why it did not load ("" when it did). */
} sp_dynlib;

#define SP_DYNLIB(soname, syms, loaded)                                                            \
	{                                                                                          \
		(soname), (syms), sizeof(syms) / sizeof((syms)[0]), (loaded),                      \
		        PTHREAD_MUTEX_INITIALIZER, 0, ""                                           \
	}

/* Loads @p lib on the first call (RTLD_NOW | RTLD_LOCAL, never closed once
 * loaded) and binds all its symbols; later calls return the same answer.
 * Returns 0, or -ENOENT with the reason in lib->why (the dynamic loader's
 * message, or the missing symbol): then no pointer of the table is set. */
int sp_dynlib_load(sp_dynlib *lib);

#endif
