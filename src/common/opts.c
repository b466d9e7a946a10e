/* The one copy of a caller's options struct. */
#include "common/opts.h"

#include "common/error.h"

#include <errno.h>
#include <string.h>

int sp_opts_copy(void *out, size_t out_size, const void *in, const char *what)
{
	if (!in)
		return 0;
	size_t sz;
	memcpy(&sz, in, sizeof(sz));
	if (sz < sizeof(size_t))
		return sp_error(-EINVAL, "%s: opts.sz is %zu, smaller than the sz field (%zu)",
		                what, sz, sizeof(size_t));
	const unsigned char *bytes = in;
	for (size_t off = out_size; off < sz; off++) {
		if (bytes[off] != 0)
			return sp_error(
			        -EINVAL,
			        "%s: opts byte at offset %zu (of sz %zu) is not zero: a field "
			        "past the %zu bytes this library (%d.%d) knows",
			        what, off, sz, out_size, STACKPULSE_VERSION_MAJOR,
			        STACKPULSE_VERSION_MINOR);
	}
	memcpy(out, in, sz < out_size ? sz : out_size);
	memcpy(out, &out_size, sizeof(out_size));
	return 0;
}
