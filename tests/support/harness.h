/* Minimal test harness. Each test binary links harness.c, which provides
 * main(): it runs every SP_TEST in the binary (or those named on the command
 * line) and ends with "summary NAME: N ok, N failed, N skipped", which tests/run_tests.sh adds up. */
#ifndef SP_TEST_HARNESS_H
#define SP_TEST_HARNESS_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "stackpulse.h"

/* For the static analyzer (clang-tidy) a failed check ends the test, so it
 * follows only paths where earlier checks passed, as a reader does. */
#if defined(__clang_analyzer__) && !defined(SP_HARNESS_IMPL)
#define SP_TEST_FAIL_ATTR _Noreturn
#else
#define SP_TEST_FAIL_ATTR
#endif

typedef void (*sp_test_fn)(void);
void sp_test_register(const char *name, sp_test_fn fn);
SP_TEST_FAIL_ATTR void sp_test_fail(const char *file, int line, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* Ends the current test at once (after a failure, or to skip). */
_Noreturn void sp_test_abort(void);
/* Skips the current test because a requirement is missing. With
 * SP_NO_SKIP=1 (zig build ci, .ci/run: CI installs every requirement) the
 * skip is a failure instead, so a broken feature cannot pass as skipped. */
_Noreturn void sp_test_skip(const char *why);
/* Skips for a property of the machine that CI cannot provide (a CPU PMU
 * present, another architecture, a kernel or cgroup behaviour); a skip even
 * with SP_NO_SKIP=1. docs/reliability.md lists every such skip. */
_Noreturn void sp_test_skip_env(const char *why);
/* 1 when SP_NO_SKIP=1: tests that would skip fail instead. */
int sp_test_no_skip(void);
/* Directory for scratch files of this test binary (created on demand). */
const char *sp_test_tmpdir(void);
/* Path of the repository root (from SP_SOURCE_ROOT or the cwd). */
const char *sp_test_source_root(void);
/* The whole file, NUL-terminated (malloc'd; NULL if unreadable). */
char *sp_test_read_file(const char *path, size_t *len);
/* Runs @p cmd through sh: its exit status, or -1 if it did not exit. */
int sp_test_run(const char *cmd);
/* 1 when @p name is a command on PATH. */
int sp_test_have_program(const char *name);
/* User + system CPU time, in clock ticks (sysconf(_SC_CLK_TCK)), of
 * thread @p tid of process @p pid (/proc/PID/task/TID/stat), or of the
 * whole process when @p tid is 0 (/proc/PID/stat); -1 if unreadable or
 * a zombie (it runs no more). What
 * a target has run, for tests that wait until it ran enough instead of a
 * fixed wall time that a loaded machine turns into less CPU. */
long long sp_test_cpu_ticks(int pid, int tid);
/* 1 when this test runs under valgrind (zig build valgrind): the code is
 * checked for memory errors there, but it runs 20-50 times slower, so
 * checks of rates, losses and timing do not hold. */
int sp_test_under_valgrind(void);

/* Opens @p len bytes at @p buf through the public stackpulse_spool_open
 * (the pure tests, linked without src/io, use sp_spool_open_memory). */
static inline int sp_test_open_memory(const void *buf, size_t len, stackpulse_spool **out)
{
	stackpulse_spool_open_opts o = STACKPULSE_SPOOL_OPEN_OPTS;
	o.buf = buf;
	o.len = len;
	return stackpulse_spool_open(NULL, &o, out);
}

/* SP_TEST_ASAN is 1 in AddressSanitizer builds (zig build sanitize): the
 * recorder runs several times slower there, so it reads target memory
 * later, which a few timing-bound checks allow for. */
#if defined(__SANITIZE_ADDRESS__)
#define SP_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SP_TEST_ASAN 1
#endif
#endif
#ifndef SP_TEST_ASAN
#define SP_TEST_ASAN 0
#endif

#define SP_TEST(name)                                                                              \
	static void name(void);                                                                    \
	__attribute__((constructor)) static void sp_register_##name(void)                          \
	{                                                                                          \
		sp_test_register(#name, name);                                                     \
	}                                                                                          \
	static void name(void)

/* CHECK records a failure and continues; REQUIRE ends the test. */
#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			sp_test_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);                      \
	} while (0)
#define REQUIRE(cond)                                                                              \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			sp_test_fail(__FILE__, __LINE__, "REQUIRE(%s)", #cond);                    \
			sp_test_abort();                                                           \
		}                                                                                  \
	} while (0)
#define CHECK_EQ(a, b)                                                                             \
	do {                                                                                       \
		long long sp_a_ = (long long)(a), sp_b_ = (long long)(b);                          \
		if (sp_a_ != sp_b_)                                                                \
			sp_test_fail(__FILE__, __LINE__, "CHECK_EQ(%s, %s): %lld != %lld", #a, #b, \
			             sp_a_, sp_b_);                                                \
	} while (0)
#define REQUIRE_EQ(a, b)                                                                           \
	do {                                                                                       \
		long long sp_a_ = (long long)(a), sp_b_ = (long long)(b);                          \
		if (sp_a_ != sp_b_) {                                                              \
			sp_test_fail(__FILE__, __LINE__, "REQUIRE_EQ(%s, %s): %lld != %lld", #a,   \
			             #b, sp_a_, sp_b_);                                            \
			sp_test_abort();                                                           \
		}                                                                                  \
	} while (0)
#define CHECK_STR(a, b)                                                                            \
	do {                                                                                       \
		const char *sp_a_ = (a), *sp_b_ = (b);                                             \
		if (!sp_a_ || !sp_b_ || strcmp(sp_a_, sp_b_) != 0)                                 \
			sp_test_fail(__FILE__, __LINE__, "CHECK_STR(%s, %s): \"%s\" != \"%s\"",    \
			             #a, #b, sp_a_ ? sp_a_ : "(null)", sp_b_ ? sp_b_ : "(null)");  \
	} while (0)
/* Checks a library call returned 0, printing the last error detail if not. */
#define CHECK_OK(expr)                                                                             \
	do {                                                                                       \
		int sp_rc_ = (expr);                                                               \
		if (sp_rc_ != 0)                                                                   \
			sp_test_fail(__FILE__, __LINE__, "%s = %d (%s: %s)", #expr, sp_rc_,        \
			             stackpulse_strerror(sp_rc_), stackpulse_last_error());        \
	} while (0)
#define REQUIRE_OK(expr)                                                                           \
	do {                                                                                       \
		int sp_rc_ = (expr);                                                               \
		if (sp_rc_ != 0) {                                                                 \
			sp_test_fail(__FILE__, __LINE__, "%s = %d (%s: %s)", #expr, sp_rc_,        \
			             stackpulse_strerror(sp_rc_), stackpulse_last_error());        \
			sp_test_abort();                                                           \
		}                                                                                  \
	} while (0)

#endif
