/* Opening perf events. Each fallback is tried only on the error that means
 * "not available here", so real failures keep their code. */
#include "record/perf_events.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"
#include "record/proc_scan.h"

int sp_perf_event_open(struct perf_event_attr *attr, pid_t tid, int cpu, int group)
{
	long fd = syscall(SYS_perf_event_open, attr, tid, cpu, group, PERF_FLAG_FD_CLOEXEC);
	return fd < 0 ? -errno : (int)fd;
}

int sp_perf_read(int fd, int lost_format, sp_perf_counts *out)
{
	uint64_t v[3] = { 0, 0, 0 };
	size_t want = (lost_format ? 3 : 2) * sizeof(uint64_t);
	ssize_t n = read(fd, v, want);
	if (n < 0)
		return -errno;
	if ((size_t)n != want)
		return -EIO;
	out->value = v[0];
	out->id = v[1];
	out->lost = lost_format ? v[2] : 0;
	return 0;
}

long sp_perf_sysctl(const char *name, long dflt)
{
	char path[128], buf[64];
	snprintf(path, sizeof(path), "/proc/sys/kernel/%s", name);
	if (sp_proc_read_small(path, buf, sizeof(buf)) <= 0)
		return dflt;
	char *end;
	long v = strtol(buf, &end, 10);
	return end == buf ? dflt : v;
}

void sp_perf_permission_hint(char *buf, size_t cap)
{
	long paranoid = sp_perf_sysctl("perf_event_paranoid", 2);
	snprintf(buf, cap,
	         "kernel.perf_event_paranoid is %ld: sampling your own processes needs <= 2 "
	         "(user space only), kernel frames need <= 1, other users' processes need "
	         "root, CAP_PERFMON or CAP_SYS_ADMIN (plus ptrace access)",
	         paranoid);
}

static void base_attr(const sp_perf_config *cfg, struct perf_event_attr *a, int cycles, int kernel,
                      int build_id, int lost_format)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->type = cycles ? PERF_TYPE_HARDWARE : PERF_TYPE_SOFTWARE;
	a->config = cycles ? (uint64_t)PERF_COUNT_HW_CPU_CYCLES : (uint64_t)PERF_COUNT_SW_CPU_CLOCK;
	a->freq = 1;
	a->sample_freq = cfg->frequency;
	a->sample_type = SP_PERF_SAMPLE_TYPE;
	a->sample_regs_user = cfg->regs_mask;
	a->sample_stack_user = cfg->stack_size;
	a->exclude_callchain_user = 1; /* User frames come from our unwinder. */
	a->exclude_kernel = kernel ? 0 : 1;
	a->exclude_callchain_kernel = kernel ? 0 : 1;
	a->exclude_hv = 1;
	a->exclude_guest = 1;
	a->inherit = 1;
	a->mmap = 1;
	a->mmap2 = 1;
	a->comm = 1;
	a->comm_exec = 1;
	a->task = 1;
	a->sample_id_all = 1;
	a->use_clockid = 1;
	a->clockid = CLOCK_MONOTONIC;
	a->build_id = build_id ? 1 : 0;
	a->disabled = 1;
	a->enable_on_exec = cfg->enable_on_exec ? 1 : 0;
	/* Each sample wakes the ring's reader at once (not at the ring
	 * owner's watermark): a CPython stack must be read before the thread
	 * pops its frames. Inherited, and kept by re-opens (same attr). */
	a->wakeup_events = cfg->wakeup_each ? 1 : 0;
	/* Lost samples per event (kernel 6.0+): with one event per thread, the
	 * loss per thread (inherited threads count toward their creator). */
	a->read_format = PERF_FORMAT_ID | (lost_format ? PERF_FORMAT_LOST : 0);
}

int sp_perf_probe(const sp_perf_config *cfg, pid_t tid, int cpu, sp_perf_setup *out)
{
	memset(out, 0, sizeof(*out));
	int try_cycles = cfg->event != STACKPULSE_PERF_EVENT_CPU_CLOCK;
	int kernel = cfg->kernel != STACKPULSE_FEATURE_OFF;
	int build_id = 1;
	int lost_format = 1;
	int cycles = try_cycles;
	int kernel_refused = 0;
	for (int attempt = 0; attempt < 16; attempt++) {
		base_attr(cfg, &out->attr, cycles, kernel, build_id, lost_format);
		int fd = sp_perf_event_open(&out->attr, tid, cpu, -1);
		if (fd >= 0) {
			out->event = cycles ? STACKPULSE_PERF_EVENT_CYCLES
			                    : STACKPULSE_PERF_EVENT_CPU_CLOCK;
			out->kernel_frames = kernel;
			out->build_id_mmap = build_id;
			out->lost_format = lost_format;
			if (cfg->kernel == STACKPULSE_FEATURE_OFF)
				snprintf(out->kernel_note, sizeof(out->kernel_note),
				         "kernel frames switched off by the caller");
			else if (kernel_refused)
				snprintf(out->kernel_note, sizeof(out->kernel_note),
				         "kernel frames refused (perf_event_paranoid is %ld; "
				         "<= 1 or CAP_PERFMON allows them)",
				         sp_perf_sysctl("perf_event_paranoid", 2));
			return fd;
		}
		if (fd == -EINVAL && lost_format) {
			lost_format = 0; /* Kernel before 6.0: no PERF_FORMAT_LOST. */
			continue;
		}
		if (fd == -EINVAL && build_id) {
			build_id = 0; /* Kernel before 5.12: no build-id in MMAP2. */
			continue;
		}
		if ((fd == -ENOENT || fd == -EOPNOTSUPP || fd == -ENODEV) && cycles &&
		    cfg->event == STACKPULSE_PERF_EVENT_AUTO) {
			cycles = 0; /* No PMU (VMs): software clock. */
			continue;
		}
		if ((fd == -EACCES || fd == -EPERM) && kernel) {
			if (cfg->kernel == STACKPULSE_FEATURE_REQUIRED) {
				char hint[320];
				sp_perf_permission_hint(hint, sizeof(hint));
				return sp_error(fd, "kernel frames were required but refused; %s",
				                hint);
			}
			kernel = 0;
			kernel_refused = 1;
			continue;
		}
		if (fd == -EACCES || fd == -EPERM) {
			char hint[320];
			sp_perf_permission_hint(hint, sizeof(hint));
			return sp_error(fd, "perf_event_open on tid %d refused; %s", (int)tid,
			                hint);
		}
		if (fd == -ESRCH)
			return sp_error(fd, "thread %d exited", (int)tid);
		if (cycles && cfg->event == STACKPULSE_PERF_EVENT_CYCLES)
			return sp_error(fd, "the cycles event is not available here (no PMU?)");
		return sp_error(fd, "perf_event_open (%s, freq %u, stack %u) failed",
		                cycles ? "cycles" : "cpu-clock", cfg->frequency, cfg->stack_size);
	}
	return sp_error(STACKPULSE_EINTERNAL, "perf_event_open fallbacks exhausted");
}

void sp_perf_switch_attr(const struct perf_event_attr *base, struct perf_event_attr *out)
{
	*out = *base;
	out->type = PERF_TYPE_SOFTWARE;
	out->config = PERF_COUNT_SW_CONTEXT_SWITCHES;
	out->freq = 0;
	out->sample_period = 1;
	/* With exclude_kernel the event never fires (its regs are the
	 * scheduler's); kernel frames stay as the sampling event has them. */
	out->exclude_kernel = 0;
	out->mmap = 0;
	out->mmap2 = 0;
	out->comm = 0;
	out->comm_exec = 0;
	out->task = 0;
	out->build_id = 0;
	out->context_switch = 1;
}

void sp_perf_switch_user_attr(const struct perf_event_attr *base, struct perf_event_attr *out)
{
	/* The privileged event's switch records and sample_id fields, on an
	 * event that samples nothing and stays in user mode. */
	sp_perf_switch_attr(base, out);
	out->config = PERF_COUNT_SW_DUMMY;
	out->sample_period = 0;
	out->exclude_kernel = 1;
	out->exclude_callchain_kernel = 1;
}

int sp_perf_open_ring_owner(int cpu, uint32_t watermark)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_DUMMY;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	a.disabled = 1;
	a.use_clockid = 1; /* SET_OUTPUT demands the same clock. */
	a.clockid = CLOCK_MONOTONIC;
	a.watermark = 1;
	a.wakeup_watermark = watermark;
	int fd = sp_perf_event_open(&a, 0, cpu, -1);
	if (fd < 0) {
		char hint[320];
		sp_perf_permission_hint(hint, sizeof(hint));
		return sp_error(fd, "cannot open the ring event on cpu %d; %s", cpu, hint);
	}
	return fd;
}
