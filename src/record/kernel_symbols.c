/* The kernel pcs a recording saw, kept in an open-addressing set, and at
 * finish the kernel symbols that contain them, written into the spool. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/hash.h"
#include "record/kallsyms.h"
#include "record/recorder.h"

int sp_recorder_kaddr_add(stackpulse_recorder *rec, uint64_t a)
{
	if (a == 0)
		return 0;
	if ((rec->kused + 1) * 2 > rec->kcap) {
		if (rec->kused >= SP_MAX_KADDRS)
			return 0; /* Beyond the cap the frames stay unnamed. */
		size_t nc = rec->kcap ? rec->kcap * 2 : 1024;
		uint64_t *nk = sp_calloc(nc, sizeof(*nk));
		if (!nk)
			return -ENOMEM;
		for (size_t i = 0; i < rec->kcap; i++) {
			if (!rec->kaddrs[i])
				continue;
			size_t j = (size_t)sp_hash64(rec->kaddrs[i]) & (nc - 1);
			while (nk[j])
				j = (j + 1) & (nc - 1);
			nk[j] = rec->kaddrs[i];
		}
		sp_free(rec->kaddrs);
		rec->kaddrs = nk;
		rec->kcap = nc;
	}
	size_t j = (size_t)sp_hash64(a) & (rec->kcap - 1);
	while (rec->kaddrs[j]) {
		if (rec->kaddrs[j] == a)
			return 0;
		j = (j + 1) & (rec->kcap - 1);
	}
	rec->kaddrs[j] = a;
	rec->kused++;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static int emit_ksym(void *ctx, uint64_t start, const char *name, const char *module)
{
	return sp_writer_ksym(ctx, start, name, module);
}

int sp_recorder_write_ksyms(stackpulse_recorder *rec)
{
	if (rec->kused == 0)
		return 0;
	size_t n = 0;
	for (size_t i = 0; i < rec->kcap; i++)
		if (rec->kaddrs[i])
			rec->kaddrs[n++] = rec->kaddrs[i]; /* Compact in place. */
	qsort(rec->kaddrs, n, sizeof(uint64_t), cmp_u64);
	rec->kused = 0;
	int zeroed = 0;
	char *dir = sp_recorder_cache_dir(rec);
	int rc = sp_kallsyms_resolve_cached(dir, rec->kaddrs, n, emit_ksym, rec->w, &zeroed);
	sp_free(dir);
	memset(rec->kaddrs, 0, rec->kcap * sizeof(uint64_t));
	if (zeroed)
		rec->kptr_zeroed = 1;
	return rc == -EACCES || rc == -ENOENT ? 0 : rc;
}
