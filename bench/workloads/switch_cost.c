/* What the context-switch event costs a switch-heavy target, part by part:
 * runs COMMAND with one perf configuration on every CPU (inherited per-CPU
 * events, as the recorder opens them) and a reader that only advances the
 * rings, so the target's own CPU (BENCH_REPORT) shows the kernel's work in
 * its context. Records seen go to stderr.
 *
 * usage: switch_cost MODE STACK_BYTES RING_KIB -- COMMAND [ARG...]
 *   none     a dummy event only (the task's perf context, no records)
 *   swrec    + PERF_RECORD_SWITCH (context_switch = 1)
 *   cs       context-switch samples at period 1: ids, time, user registers
 *   cs_cc    cs + kernel callchain
 *   cs_stk   cs + user stack copy of STACK_BYTES
 *   cs_all   cs + callchain + stack copy (what the recorder asks for)
 *   freq:N   cs_all in frequency mode at N per second, plus swrec
 * build: gcc -O2 -pthread -o switch_cost switch_cost.c */
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_CPUS 256

static int ncpu, ring_fd[MAX_CPUS];
static struct perf_event_mmap_page *meta[MAX_CPUS];
static size_t ring_size;
static volatile int done;
static uint64_t nsamples, nswitch, nlost;

static void *reader(void *arg)
{
	(void)arg;
	struct pollfd pf[MAX_CPUS];
	for (int c = 0; c < ncpu; c++)
		pf[c] = (struct pollfd){ .fd = ring_fd[c], .events = POLLIN };
	while (!done) {
		poll(pf, (nfds_t)ncpu, 100);
		for (int c = 0; c < ncpu; c++) {
			uint64_t head = __atomic_load_n(&meta[c]->data_head, __ATOMIC_ACQUIRE);
			uint64_t tail = meta[c]->data_tail;
			const uint8_t *data = (const uint8_t *)meta[c] + sysconf(_SC_PAGESIZE);
			while (tail < head) {
				/* Headers are 8-byte aligned: never split at the end. */
				struct perf_event_header h;
				memcpy(&h, data + (tail & (ring_size - 1)), sizeof(h));
				if (h.type == PERF_RECORD_SAMPLE)
					nsamples++;
				else if (h.type == PERF_RECORD_SWITCH)
					nswitch++;
				else if (h.type == PERF_RECORD_LOST) {
					uint64_t n;
					memcpy(&n, data + ((tail + 16) & (ring_size - 1)), 8);
					nlost += n;
				}
				tail += h.size ? h.size : 8;
			}
			__atomic_store_n(&meta[c]->data_tail, tail, __ATOMIC_RELEASE);
		}
	}
	return NULL;
}

/* A software event @p config of the target, inherited, enabled at exec. */
static void task_attr(struct perf_event_attr *a, uint64_t config)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->type = PERF_TYPE_SOFTWARE;
	a->config = config;
	a->sample_id_all = 1;
	a->inherit = 1;
	a->disabled = 1;
	a->enable_on_exec = 1;
	a->use_clockid = 1;
	a->clockid = CLOCK_MONOTONIC;
}

static int open_event(struct perf_event_attr *a, pid_t pid, int cpu)
{
	return (int)syscall(SYS_perf_event_open, a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

int main(int argc, char **argv)
{
	if (argc < 6 || strcmp(argv[4], "--") != 0) {
		fprintf(stderr, "usage: switch_cost MODE STACK_BYTES RING_KIB -- COMMAND...\n");
		return 2;
	}
	const char *mode = argv[1];
	unsigned stack = (unsigned)atoi(argv[2]);
	ring_size = (size_t)atoi(argv[3]) * 1024;
	int freq = strncmp(mode, "freq:", 5) == 0;
	int swrec = freq || strcmp(mode, "swrec") == 0;
	int cs = freq || strncmp(mode, "cs", 2) == 0;
	int cc = freq || strstr(mode, "_cc") || strstr(mode, "_all");
	int stk = freq || strstr(mode, "_stk") || strstr(mode, "_all");
	ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpu > MAX_CPUS || (ring_size & (ring_size - 1)) || ring_size < 8192)
		return 2;
	int go[2];
	if (pipe(go))
		return 1;
	pid_t child = fork();
	if (child == 0) {
		char c;
		if (read(go[0], &c, 1) != 1)
			_exit(126);
		execvp(argv[5], argv + 5);
		_exit(127);
	}
	for (int c = 0; c < ncpu; c++) {
		struct perf_event_attr d;
		task_attr(&d, PERF_COUNT_SW_DUMMY);
		d.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
		                PERF_SAMPLE_IDENTIFIER;
		d.watermark = 1;
		d.wakeup_watermark = (uint32_t)(ring_size / 4);
		d.context_switch = swrec ? 1 : 0;
		d.exclude_kernel = 1;
		ring_fd[c] = open_event(&d, child, c);
		if (ring_fd[c] < 0) {
			perror("perf_event_open (dummy)");
			return 1;
		}
		meta[c] = mmap(NULL, ring_size + (size_t)sysconf(_SC_PAGESIZE),
		               PROT_READ | PROT_WRITE, MAP_SHARED, ring_fd[c], 0);
		if (meta[c] == MAP_FAILED) {
			perror("mmap");
			return 1;
		}
		if (!cs)
			continue;
		struct perf_event_attr a;
		task_attr(&a, PERF_COUNT_SW_CONTEXT_SWITCHES);
		a.sample_period = 1;
		if (freq) {
			a.freq = 1;
			a.sample_freq = (uint64_t)atoi(mode + 5);
		}
		a.sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID |
		                PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_REGS_USER |
		                (cc ? PERF_SAMPLE_CALLCHAIN : 0) |
		                (stk ? PERF_SAMPLE_STACK_USER : 0);
		a.sample_regs_user = 0xff0fff; /* x86_64: the registers the unwinder takes */
		a.sample_stack_user = stk ? stack : 0;
		a.exclude_callchain_user = 1;
		a.exclude_hv = 1;
		int fd = open_event(&a, child, c);
		if (fd < 0 || ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, ring_fd[c]) != 0) {
			perror("context-switch event");
			return 1;
		}
	}
	pthread_t t;
	pthread_create(&t, NULL, reader, NULL);
	if (write(go[1], "x", 1) != 1)
		return 1;
	int status;
	waitpid(child, &status, 0);
	usleep(200000);
	done = 1;
	pthread_join(t, NULL);
	fprintf(stderr, "%s: %llu samples, %llu switch records, %llu lost\n", mode,
	        (unsigned long long)nsamples, (unsigned long long)nswitch,
	        (unsigned long long)nlost);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
