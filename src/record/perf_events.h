/* perf_event attribute setup and opening with automatic fallbacks (cycles
 * to cpu-clock, kernel to user-only, build-id mmap2 to plain mmap2). */
#ifndef SP_RECORD_PERF_EVENTS_H
#define SP_RECORD_PERF_EVENTS_H

#include <linux/perf_event.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* PERF_SAMPLE_* bits of every sampling event; the parser in sample.c
 * depends on this exact set. */
#define SP_PERF_SAMPLE_TYPE                                                                        \
	(PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |            \
	 PERF_SAMPLE_CPU | PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER)

typedef struct sp_perf_config {
	int event;          /* stackpulse_event requested. */
	int kernel;         /* stackpulse_feature for kernel frames. */
	uint32_t frequency; /* Hz. */
	uint32_t stack_size;
	uint64_t regs_mask; /* sample_regs_user. */
	int enable_on_exec; /* spawn: start disabled, enable at exec. */
	int wakeup_each;    /* Wake the reader at every sample (wakeup_events 1). */
} sp_perf_config;

/* The attribute chosen by sp_perf_probe, used for every other open. */
typedef struct sp_perf_setup {
	struct perf_event_attr attr;
	int event;         /* stackpulse_event used. */
	int kernel_frames; /* 1 when exclude_kernel is 0. */
	int build_id_mmap; /* 1 when MMAP2 records carry build-ids. */
	int lost_format;   /* 1 when read() reports lost samples (PERF_FORMAT_LOST). */
	char kernel_note[256];
} sp_perf_setup;

int sp_perf_event_open(struct perf_event_attr *attr, pid_t tid, int cpu, int group);

/* What read() of a sampling event returns (read_format ID, and LOST when
 * setup.lost_format). */
typedef struct sp_perf_counts {
	uint64_t value, id, lost;
} sp_perf_counts;

/* Reads a sampling event's counters; 0 or -errno. */
int sp_perf_read(int fd, int lost_format, sp_perf_counts *out);

/* Opens the first sampling event (thread @p tid, cpu @p cpu), trying the
 * fallbacks in order, and fills @p out with the attribute that worked.
 * Returns the fd or a negative code with a detailed message (for EACCES it
 * names perf_event_paranoid and what would allow the open). */
int sp_perf_probe(const sp_perf_config *cfg, pid_t tid, int cpu, sp_perf_setup *out);

/* The attribute of the off-CPU event from the sampling attribute @p base:
 * the context-switch software event at period 1 with the same sample
 * fields (callchain, user registers and stack copy), PERF_RECORD_SWITCH on,
 * and no other side-band records (the sampling event has those). Kernel
 * mode is never excluded: the event fires inside the scheduler. */
void sp_perf_switch_attr(const struct perf_event_attr *base, struct perf_event_attr *out);

/* The attribute of the unprivileged off-CPU event from @p base: a dummy
 * software event, user mode only, that counts nothing and only has the
 * kernel write PERF_RECORD_SWITCH records (switch-out with the preempt
 * flag, switch-in) with the sample_id fields of @p base. Allowed at
 * perf_event_paranoid 2 on one's own threads. */
void sp_perf_switch_user_attr(const struct perf_event_attr *base, struct perf_event_attr *out);

/* Opens the per-CPU ring owner: a dummy event on the calling thread with
 * the same clock as the sampling events, waking readers every
 * @p watermark bytes. */
int sp_perf_open_ring_owner(int cpu, uint32_t watermark);

/* Reads a sysctl under /proc/sys/kernel as an integer (or @p dflt). */
long sp_perf_sysctl(const char *name, long dflt);

/* Appends the permission explanation used in error details. */
void sp_perf_permission_hint(char *buf, size_t cap);

#endif
