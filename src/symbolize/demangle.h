/* Symbol name demangling: C++ (Itanium, via __cxa_demangle from
 * libstdc++, loaded at the first C++ name), Rust legacy (hash suffix and $-escapes removed) and Rust v0
 * (our own bounded demangler). Names that fail to demangle stay raw, and
 * so do C++ names over 8 KiB mangled or 16 KiB demangled. */
#ifndef SP_SYMBOLIZE_DEMANGLE_H
#define SP_SYMBOLIZE_DEMANGLE_H

#include <stddef.h>

#include "strpool.h"

/* Returns the pooled display name of @p raw (demangled unless @p keep_raw),
 * or NULL on allocation failure. */
const char *sp_demangle(sp_strpool *pool, const char *raw, int keep_raw);

/* 1 when libstdc++'s __cxa_demangle could be loaded (on the first call). */
int sp_demangle_cxx_available(void);

/* Demangles a Rust v0 symbol into @p out (@p cap bytes). Returns 0, or
 * STACKPULSE_EFORMAT (no message) when @p sym is not one we can decode. */
int sp_rust_v0_demangle(const char *sym, char *out, size_t cap);

#endif
