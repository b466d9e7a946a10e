/* The one growable array: capacity doubles (from 16) until it holds what is
 * needed, never past a caller's cap, and a failure leaves the array as it
 * was. */
#ifndef SP_COMMON_GROW_H
#define SP_COMMON_GROW_H

#include <stddef.h>
#include <stdint.h>

/* The capacity sp_grow picks for @p need entries (at most @p max); callers
 * that charge a memory budget ask first. */
uint32_t sp_grow_cap(uint32_t cap, uint32_t need, uint32_t max);
/* Grows *arr (entries of @p elem bytes, capacity *cap) to hold @p need:
 * 0, -ENOMEM, or STACKPULSE_ELIMIT past @p max; @p what names the entries
 * in messages ("more than MAX WHAT"). */
int sp_grow(void **arr, uint32_t *cap, uint32_t need, size_t elem, uint32_t max, const char *what);
#define SP_GROW(arr, cap, need, max, what)                                                         \
	sp_grow((void **)&(arr), &(cap), (need), sizeof(*(arr)), (max), (what))

#endif
