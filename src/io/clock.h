/* The clocks the recorder reads, in nanoseconds. */
#ifndef SP_IO_CLOCK_H
#define SP_IO_CLOCK_H

#include <stdint.h>
#include <time.h>

/* @p c (CLOCK_MONOTONIC, CLOCK_REALTIME, ...) now, in ns. */
static inline uint64_t sp_clock_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CLOCK_MONOTONIC now, in ns: the clock of the perf records. */
static inline uint64_t sp_mono_ns(void)
{
	return sp_clock_ns(CLOCK_MONOTONIC);
}

#endif
