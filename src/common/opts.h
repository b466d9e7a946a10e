/* The one copy of a caller's options struct (docs/abi.md, "Options
 * structs"): every public options struct starts with `size_t sz`. */
#ifndef SP_COMMON_OPTS_H
#define SP_COMMON_OPTS_H

#include <stddef.h>

/* Copies the caller's options @p in into @p out, an options struct of
 * @p out_size bytes that already holds the defaults: the first
 * min(in's sz, @p out_size) bytes are copied, so fields past the caller's
 * sz keep their defaults, and out's sz becomes @p out_size. A NULL @p in
 * keeps the defaults. Fails with -EINVAL and a message that starts with
 * @p what when in's sz does not cover sz itself, or when a byte of @p in
 * at or past @p out_size is not zero: a field of a newer header that this
 * library does not know (the message names its offset), which must not be
 * dropped without a word. Pure. */
int sp_opts_copy(void *out, size_t out_size, const void *in, const char *what);

#endif
