/* One mmapped perf ring per CPU; records are copied out when they wrap and
 * checked against what is left before the callback sees them. */
#ifndef SP_RECORD_RING_H
#define SP_RECORD_RING_H

#include <linux/perf_event.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sp_ring {
	int fd; /* Owner event; -1 when unused. */
	int cpu;
	struct perf_event_mmap_page *meta; /* Control page. */
	uint8_t *data;                     /* Data area, size bytes. */
	uint64_t size;                     /* Power of two. */
	size_t map_len;                    /* meta page + data. */
	uint8_t *copy;                     /* Scratch for wrapped records (64 KiB). */
	uint64_t corrupt;                  /* Records skipped as malformed. */
	uint64_t peeked;                   /* Size of the record under peek. */
	uint64_t scan_pos;                 /* sp_ring_scan's position (absolute). */
	uint8_t *scan_copy;                /* Its scratch for wrapped records. */
} sp_ring;

/* Ring budget (locked memory) for privileged recorders: rings start sized
 * to hold SP_RING_START_MS of samples at the full rate and grow (a re-open
 * moves a CPU's events into a ring four times larger) while the recorder
 * falls behind, up to SP_RING_HOLD_MS of them, within these bounds. */
#define SP_RING_BUDGET   (1ull << 30)   /* All rings together. */
#define SP_RING_CPU_MAX  (256ull << 20) /* One ring. */
#define SP_RING_CPU_MIN  (2ull << 20)   /* Privileged floor (the former fixed size). */
#define SP_RING_HOLD_MS  250u
#define SP_RING_START_MS 125u
#define SP_RING_GROWTH   4u /* Size factor of one growth step. */

/* Data bytes per CPU for a privileged recorder (CAP_IPC_LOCK lifts
 * perf_event_mlock_kb): a power of two that holds @p hold_ms of samples of
 * @p record_bytes at @p frequency (one thread runs on a CPU at a time, so
 * that is the most a CPU's ring takes in), clamped to SP_RING_CPU_MIN ..
 * min(SP_RING_CPU_MAX, SP_RING_BUDGET / ncpu, @p ram_bytes / 16 / ncpu). */
uint64_t sp_ring_budget_bytes(uint32_t frequency, uint64_t record_bytes, uint32_t hold_ms, int ncpu,
                              uint64_t ram_bytes);

/* Maps @p data_bytes (a power-of-two number of pages) of ring on @p fd,
 * halving on EPERM/ENOMEM down to 8 pages (mlock limits). Takes @p fd. */
int sp_ring_map(sp_ring *r, int fd, int cpu, size_t data_bytes);
void sp_ring_unmap(sp_ring *r);

/* Bytes written and not yet released. */
uint64_t sp_ring_used(const sp_ring *r);

/* Peeks at the next unread record without releasing it: 1 with
 * hdr, rec and len set (valid until sp_ring_release or the next peek), 0 when
 * the ring is empty. Malformed space is skipped and counted. */
int sp_ring_peek(sp_ring *r, struct perf_event_header *hdr, const uint8_t **rec, size_t *len);
/* Releases the record returned by the last peek. */
void sp_ring_release(sp_ring *r);

/* Reads ahead of the consumer: the next record at or after r->scan_pos
 * (never before the unreleased tail), without releasing anything. Returns
 * 1 with hdr, rec and len set (valid until the next scan) and scan_pos
 * moved past it, 0 when there is none or on -ENOMEM. */
int sp_ring_scan(sp_ring *r, struct perf_event_header *hdr, const uint8_t **rec, size_t *len);

#endif
