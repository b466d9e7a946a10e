/* Ring reading follows the kernel's contract: data_head is read with
 * acquire ordering before the data, data_tail is written with release
 * ordering after we are done with the bytes. */
#include "record/ring.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/error.h"

#define COPY_BYTES 65536 /* header.size is 16 bits: no record is larger. */

uint64_t sp_ring_budget_bytes(uint32_t frequency, uint64_t record_bytes, uint32_t hold_ms, int ncpu,
                              uint64_t ram_bytes)
{
	uint64_t n = ncpu > 0 ? (uint64_t)ncpu : 1;
	uint64_t cap = SP_RING_BUDGET / n;
	if (cap > SP_RING_CPU_MAX)
		cap = SP_RING_CPU_MAX;
	if (ram_bytes && ram_bytes / 16 / n < cap)
		cap = ram_bytes / 16 / n;
	uint64_t need = (uint64_t)frequency * record_bytes / 1000u * hold_ms;
	uint64_t bytes = SP_RING_CPU_MIN;
	while (bytes < need && bytes * 2 <= cap)
		bytes *= 2;
	return bytes;
}

int sp_ring_map(sp_ring *r, int fd, int cpu, size_t data_bytes)
{
	memset(r, 0, sizeof(*r));
	r->fd = fd;
	r->cpu = cpu;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t bytes = page * 8;
	while (bytes * 2 <= data_bytes)
		bytes *= 2; /* Round down to a power of two. */
	r->copy = sp_malloc(COPY_BYTES);
	if (!r->copy)
		return -ENOMEM;
	for (;;) {
		void *p = mmap(NULL, bytes + page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p != MAP_FAILED) {
			r->meta = p;
			r->data = (uint8_t *)p + page;
			r->size = bytes;
			r->map_len = bytes + page;
			return 0;
		}
		int e = errno;
		if ((e == EPERM || e == ENOMEM) && bytes > page * 8) {
			bytes /= 2; /* Over perf_event_mlock_kb and RLIMIT_MEMLOCK: shrink. */
			continue;
		}
		return sp_error(-e,
		                "mmap of a %zu KiB perf ring on cpu %d failed "
		                "(perf_event_mlock_kb and ulimit -l bound it)",
		                bytes / 1024, cpu);
	}
}

void sp_ring_unmap(sp_ring *r)
{
	if (r->meta)
		munmap(r->meta, r->map_len);
	if (r->fd >= 0)
		close(r->fd);
	sp_free(r->copy);
	sp_free(r->scan_copy);
	memset(r, 0, sizeof(*r));
	r->fd = -1;
}

uint64_t sp_ring_used(const sp_ring *r)
{
	if (!r->meta)
		return 0;
	uint64_t head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = r->meta->data_tail;
	return head > tail ? head - tail : 0;
}

/* Copies @p n bytes at ring position @p pos, wrapping at the end. */
static void ring_copy(const sp_ring *r, uint64_t pos, void *dst, size_t n)
{
	uint64_t off = pos & (r->size - 1);
	size_t first = (size_t)(r->size - off);
	if (first >= n) {
		memcpy(dst, r->data + off, n);
	} else {
		memcpy(dst, r->data + off, first);
		memcpy((uint8_t *)dst + first, r->data, n - first);
	}
}

int sp_ring_peek(sp_ring *r, struct perf_event_header *hdr, const uint8_t **rec, size_t *len)
{
	r->peeked = 0;
	if (!r->meta)
		return 0;
	uint64_t head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = r->meta->data_tail;
	if (tail >= head)
		return 0;
	uint64_t left = head - tail;
	if (left < sizeof(*hdr) || left > r->size)
		goto corrupt;
	ring_copy(r, tail, hdr, sizeof(*hdr));
	if (hdr->size < sizeof(*hdr) || hdr->size > left)
		goto corrupt;
	uint64_t off = tail & (r->size - 1);
	if (off + hdr->size <= r->size) {
		*rec = r->data + off;
	} else {
		ring_copy(r, tail, r->copy, hdr->size);
		*rec = r->copy;
	}
	*len = hdr->size;
	r->peeked = hdr->size;
	return 1;
corrupt:
	/* Cannot happen with a sane kernel: resynchronise at the head. */
	r->corrupt++;
	__atomic_store_n(&r->meta->data_tail, head, __ATOMIC_RELEASE);
	return 0;
}

void sp_ring_release(sp_ring *r)
{
	if (!r->meta || !r->peeked)
		return;
	__atomic_store_n(&r->meta->data_tail, r->meta->data_tail + r->peeked, __ATOMIC_RELEASE);
	r->peeked = 0;
}

int sp_ring_scan(sp_ring *r, struct perf_event_header *hdr, const uint8_t **rec, size_t *len)
{
	if (!r->meta)
		return 0;
	uint64_t head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = r->meta->data_tail;
	if (r->scan_pos < tail || r->scan_pos > head)
		r->scan_pos = tail;
	uint64_t left = head - r->scan_pos;
	if (left < sizeof(*hdr) || head - tail > r->size)
		return 0;
	ring_copy(r, r->scan_pos, hdr, sizeof(*hdr));
	if (hdr->size < sizeof(*hdr) || hdr->size > left)
		return 0; /* sp_ring_peek resynchronises when it gets there */
	uint64_t off = r->scan_pos & (r->size - 1);
	if (off + hdr->size <= r->size) {
		*rec = r->data + off;
	} else {
		if (!r->scan_copy && !(r->scan_copy = sp_malloc(COPY_BYTES)))
			return 0;
		ring_copy(r, r->scan_pos, r->scan_copy, hdr->size);
		*rec = r->scan_copy;
	}
	*len = hdr->size;
	r->scan_pos += hdr->size;
	return 1;
}
