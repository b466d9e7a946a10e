/* The one binary search over sorted arrays. */
#ifndef SP_COMMON_SEARCH_H
#define SP_COMMON_SEARCH_H

#include <stddef.h>

/* Sets @p out to the number of leading indices in [0, n) for which the
 * expression @p before holds, evaluated with the variable @p i bound to the
 * probed index. @p before must hold for a prefix and fail after it:
 * "key(i) <= k" gives one past the last element at or below k, "key(i) < k"
 * the first element at or above k. O(log n) evaluations. */
#define SP_PARTITION_POINT(out, n, i, before)                                                      \
	do {                                                                                       \
		size_t sp_lo_ = 0, sp_hi_ = (size_t)(n);                                           \
		while (sp_lo_ < sp_hi_) {                                                          \
			size_t i = sp_lo_ + (sp_hi_ - sp_lo_) / 2;                                 \
			if (before)                                                                \
				sp_lo_ = i + 1;                                                    \
			else                                                                       \
				sp_hi_ = i;                                                        \
		}                                                                                  \
		(out) = sp_lo_;                                                                    \
	} while (0)

#endif
