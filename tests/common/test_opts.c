/* The options copy (src/common/opts.h): sizes, defaults, unknown tails. */
#include "harness.h"

#include "common/opts.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

struct old_opts {
	size_t sz;
	uint32_t a;
	uint32_t b;
};

struct new_opts {
	size_t sz;
	uint32_t a;
	uint32_t b;
	uint64_t c; /* a field the "library" (old_opts) does not know */
};

SP_TEST(null_keeps_defaults)
{
	struct old_opts o = { .sz = sizeof(o), .a = 7, .b = 8 };
	CHECK_OK(sp_opts_copy(&o, sizeof(o), NULL, "t"));
	CHECK(o.sz == sizeof(o) && o.a == 7 && o.b == 8);
}

SP_TEST(same_size_copies_all)
{
	struct old_opts o = { .sz = sizeof(o), .a = 7, .b = 8 };
	struct old_opts in = { .sz = sizeof(in), .a = 1, .b = 2 };
	CHECK_OK(sp_opts_copy(&o, sizeof(o), &in, "t"));
	CHECK(o.sz == sizeof(o) && o.a == 1 && o.b == 2);
}

SP_TEST(short_sz_keeps_later_defaults)
{
	struct old_opts o = { .sz = sizeof(o), .a = 7, .b = 8 };
	struct old_opts in = { .sz = offsetof(struct old_opts, b), .a = 1, .b = 2 };
	CHECK_OK(sp_opts_copy(&o, sizeof(o), &in, "t"));
	CHECK(o.sz == sizeof(o) && o.a == 1 && o.b == 8);
	/* Only sz: every field keeps its default. */
	in.sz = sizeof(size_t);
	CHECK_OK(sp_opts_copy(&o, sizeof(o), &in, "t"));
	CHECK(o.sz == sizeof(o) && o.a == 1 && o.b == 8);
}

SP_TEST(sz_smaller_than_sz_refused)
{
	struct old_opts o = { .sz = sizeof(o), .a = 7, .b = 8 };
	for (size_t sz = 0; sz < sizeof(size_t); sz++) {
		struct old_opts in = { .sz = sz, .a = 1 };
		CHECK_EQ(sp_opts_copy(&o, sizeof(o), &in, "thing"), -EINVAL);
		CHECK(strstr(stackpulse_last_error(), "thing: opts.sz is") != NULL);
		CHECK(o.a == 7 && o.b == 8); /* untouched */
	}
}

SP_TEST(bigger_with_zero_tail_accepted)
{
	struct old_opts o = { .sz = sizeof(o), .a = 7, .b = 8 };
	struct new_opts in;
	memset(&in, 0, sizeof(in));
	in.sz = sizeof(in);
	in.a = 1;
	in.b = 2;
	CHECK_OK(sp_opts_copy(&o, sizeof(o), &in, "t"));
	CHECK(o.sz == sizeof(o) && o.a == 1 && o.b == 2);
}

SP_TEST(bigger_with_nonzero_tail_refused_naming_offset)
{
	struct old_opts o = { .sz = sizeof(o), .a = 7, .b = 8 };
	for (size_t byte = 0; byte < sizeof(uint64_t); byte++) {
		struct new_opts in;
		memset(&in, 0, sizeof(in));
		in.sz = sizeof(in);
		in.a = 1;
		((unsigned char *)&in)[offsetof(struct new_opts, c) + byte] = 0x5a;
		CHECK_EQ(sp_opts_copy(&o, sizeof(o), &in, "thing"), -EINVAL);
		char want[64];
		snprintf(want, sizeof(want), "offset %zu ", offsetof(struct new_opts, c) + byte);
		CHECK(strstr(stackpulse_last_error(), want) != NULL);
		CHECK(strncmp(stackpulse_last_error(), "thing: ", 7) == 0);
		CHECK(o.a == 7 && o.b == 8); /* untouched */
	}
	/* Bytes past the caller's sz are not read. */
	struct new_opts in;
	memset(&in, 0, sizeof(in));
	in.sz = sizeof(struct old_opts);
	in.a = 3;
	in.c = 99;
	CHECK_OK(sp_opts_copy(&o, sizeof(o), &in, "t"));
	CHECK(o.a == 3);
}
