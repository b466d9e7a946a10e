#include "common/grow.h"

#include <errno.h>

#include "common/alloc.h"
#include "common/error.h"

uint32_t sp_grow_cap(uint32_t cap, uint32_t need, uint32_t max)
{
	uint32_t n = cap ? cap : 16;
	if (n > max)
		n = max;
	while (n < need)
		n = n > max / 2 ? max : n * 2;
	return n < need ? need : n;
}

int sp_grow(void **arr, uint32_t *cap, uint32_t need, size_t elem, uint32_t max, const char *what)
{
	if (need <= *cap)
		return 0;
	if (need > max)
		return sp_error(STACKPULSE_ELIMIT, "more than %u %s", max, what);
	uint32_t n = sp_grow_cap(*cap, need, max);
	void *p = sp_realloc_array(*arr, n, elem);
	if (!p)
		return sp_error(-ENOMEM, "cannot grow to %u %s", n, what);
	*arr = p;
	*cap = n;
	return 0;
}
