/* Writes the seed corpus of fuzz/python_frames: valid synthetic images of
 * every layout (plain chains, shims on the C stack, several threads, a deep
 * chain, 3.10 stacks anchored on the stack copy) and mutated copies. Build and run from the repository root:
 *   cc -std=c17 -D_GNU_SOURCE -Iinclude -Isrc tests/python/gen_python_corpus.c \
 *      src/python/layout.c src/common/error.c -o /tmp/gen && /tmp/gen corpus/python_frames */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "py_image.h"

static py_img im;
static uint8_t out[IMG_HDR + IMG_MAX];

static void save(const char *dir, const char *name, int v, int flags, uint32_t len)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	out[0] = (uint8_t)v;
	out[1] = (uint8_t)flags;
	sp_put_le32(out + 2, 4242);
	memcpy(out + IMG_HDR, im.mem, len);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(out, 1, IMG_HDR + len, f) != IMG_HDR + len) {
		perror(path);
		exit(1);
	}
	fclose(f);
}

/* A fixed xorshift sequence: the corpus is the same on every run. */
static uint32_t rnd_state = 12345;
static uint32_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 17;
	rnd_state ^= rnd_state << 5;
	return rnd_state;
}

static const int32_t lines_a[] = { 3, 4, 4, 5, 5, 5 };
static const int32_t lines_b[] = { 9, 10, 11, 11 };

/* kind 0: plain chain, 1: with a shim frame on the stack, 2: two threads,
 * 3: a chain of 60 frames whose root loops back to its top (depth limit). */
static int build(int v, int kind)
{
	if (img_init(&im, v) != 0)
		return -1;
	uint64_t a = img_code(&im, "fib", "/t/demo.py", 2, lines_a, 6);
	uint64_t b = img_code(&im, "Worker.run", "/t/demo.py", 8, lines_b, 4);
	uint64_t m = img_code(&im, "<module>", "/t/demo.py", 1, lines_b, 4);
	if (!a || !b || !m)
		return -1;
	uint64_t root = img_frame(&im, m, 1, 0, 1, 0, 0);
	uint64_t below = root;
	if (kind == 1 && im.l.owner_first_c != 0xff)
		below = img_frame(&im, 0, 0, root, 0, 3, IMG_BASE + IMG_MAX - IMG_STACK_LEN + 256);
	uint64_t mid = img_frame(&im, b, 2, below, kind == 1, 0, 0);
	uint64_t top = mid;
	int depth = kind == 3 ? 60 : 2;
	for (int i = 0; i < depth && top; i++)
		top = img_frame(&im, a, (uint32_t)(i % 6), top, 0, 0, 0);
	if (!top)
		return -1;
	if (kind == 3)
		img_put64(&im, root + im.l.frame_previous, top);
	uint64_t ts = img_runtime(&im, 4242, top);
	if (!ts)
		return -1;
	if (kind == 2) {
		uint64_t ts2 = img_alloc(&im, im.l.tstate_read);
		uint64_t top2 = img_frame(&im, b, 1, root, 0, 0, 0);
		if (!ts2 || !top2)
			return -1;
		img_put64(&im, ts + im.l.tstate_next, ts2);
		if (im.l.tstate_native_thread_id != SP_PY_NONE)
			img_put64(&im, ts2 + im.l.tstate_native_thread_id, 4243);
		img_put64(&im, ts2 + im.l.tstate_frame,
		          im.l.cframe_current_frame != SP_PY_NONE ? 0 : top2);
	}
	return 0;
}

/* 3.10 with a stack copy naming its frames (frame and code pointers per
 * activation, as _PyEval_EvalFrameDefault spills them) for the anchored
 * walk; @p freed: the middle frame was freed since (a gap). */
static int build_anchored(int freed)
{
	if (img_init(&im, 0) != 0)
		return -1;
	uint64_t a = img_code(&im, "fib", "/t/demo.py", 2, lines_a, 6);
	uint64_t m = img_code(&im, "<module>", "/t/demo.py", 1, lines_b, 4);
	if (!a || !m)
		return -1;
	uint64_t fr[4], co[4] = { a, a, a, m };
	fr[3] = img_frame(&im, m, 1, 0, 1, 0, 0);
	for (int i = 2; i >= 0; i--)
		fr[i] = img_frame(&im, a, (uint32_t)i, fr[i + 1], 1, 0, 0);
	if (!fr[0] || !img_runtime(&im, 4242, fr[3]))
		return -1;
	uint64_t stk = IMG_BASE + IMG_MAX - IMG_STACK_LEN;
	for (int i = 0; i < 4; i++) {
		img_put64(&im, stk + 32 + 416 * (uint64_t)i, fr[i]);
		img_put64(&im, stk + 72 + 416 * (uint64_t)i, co[i]);
	}
	if (freed)
		img_put64(&im, fr[1], 0); /* ob_refcnt */
	return 0;
}

/* Threads in threading._active with their names, as each version keeps
 * them (@p with_dict: the first with a dict of its own). */
static int build_names(int v, int with_dict)
{
	static const char *const names[] = { "MainThread", "CustomThreadName-1",
		                             "Thread-2 (work)" };
	static const uint64_t idents[] = { 0x7f0012345740ull, 0x7f00017fe6c0ull,
		                           0x8000000000000001ull };
	if (build(v, 2) != 0)
		return -1;
	uint64_t interp = sp_le64(im.mem + im.l.runtime_interpreters_head);
	return img_threading(&im, interp, 3, names, idents, with_dict);
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "corpus/python_frames";
	const char *names[] = { "310", "311", "312", "313", "314" };
	for (int v = 0; v < IMG_NVERSIONS; v++) {
		for (int kind = 0; kind < 4; kind++) {
			if (build(v, kind) != 0) {
				fprintf(stderr, "build %d/%d failed\n", v, kind);
				continue;
			}
			char name[64];
			snprintf(name, sizeof(name), "valid_%s_%d", names[v], kind);
			save(dir, name, v, 1 | 2 | 16, IMG_MAX);
			/* Mutations: flipped bytes in the used part. */
			for (int k = 0; k < 1; k++) {
				for (int j = 0; j < 8; j++)
					im.mem[rnd() % im.used] ^= (uint8_t)(1u << (rnd() % 8));
				snprintf(name, sizeof(name), "mutated_%s_%d_%d", names[v], kind, k);
				save(dir, name, v, 2 | 16, IMG_MAX);
			}
		}
	}
	for (int v = 0; v < IMG_NVERSIONS; v++) {
		for (int with_dict = 0; with_dict < 2; with_dict++) {
			char name[64];
			if (build_names(v, with_dict) != 0) {
				fprintf(stderr, "names %d/%d failed\n", v, with_dict);
				continue;
			}
			snprintf(name, sizeof(name), "names_%s_%d", names[v], with_dict);
			save(dir, name, v, 2 | 16, IMG_MAX);
			for (int j = 0; j < 8; j++)
				im.mem[2048 + rnd() % (im.used - 2048)] ^=
				        (uint8_t)(1u << (rnd() % 8));
			snprintf(name, sizeof(name), "names_mutated_%s_%d", names[v], with_dict);
			save(dir, name, v, 2 | 16, IMG_MAX);
		}
	}
	for (int freed = 0; freed < 2; freed++) {
		if (build_anchored(freed) != 0)
			return 1;
		save(dir, freed ? "anchor_310_gap" : "anchor_310", 0, 1 | 2 | 16, IMG_MAX);
	}
	return 0;
}
