/* Error codes, messages and the per-thread detail (src/common/error.h). */
#include "harness.h"

#include "common/error.h"

#include <errno.h>
#include <pthread.h>

static const int lib_codes[] = {
	STACKPULSE_EFORMAT,      STACKPULSE_ETRUNCATED, STACKPULSE_EVERSION,  STACKPULSE_ECHECKSUM,
	STACKPULSE_EUNSUPPORTED, STACKPULSE_ELIMIT,     STACKPULSE_EBUILDID,  STACKPULSE_ESTATE,
	STACKPULSE_ECOMPRESS,    STACKPULSE_ENOTFOUND,  STACKPULSE_EINTERNAL,
};
#define NCODES (sizeof(lib_codes) / sizeof(lib_codes[0]))

SP_TEST(version_matches_header)
{
	char want[32];
	snprintf(want, sizeof(want), "%d.%d.%d", STACKPULSE_VERSION_MAJOR, STACKPULSE_VERSION_MINOR,
	         STACKPULSE_VERSION_PATCH);
	CHECK_STR(stackpulse_version(), want);
}

SP_TEST(library_codes_have_distinct_messages)
{
	CHECK_STR(stackpulse_strerror(0), "success");
	CHECK_STR(stackpulse_strerror(STACKPULSE_EFORMAT), "malformed input");
	CHECK_STR(stackpulse_strerror(STACKPULSE_ETRUNCATED), "input is truncated");
	CHECK_STR(stackpulse_strerror(STACKPULSE_EVERSION), "unsupported format version");
	CHECK_STR(stackpulse_strerror(STACKPULSE_ECHECKSUM), "checksum mismatch");
	CHECK_STR(stackpulse_strerror(STACKPULSE_EUNSUPPORTED), "not supported");
	CHECK_STR(stackpulse_strerror(STACKPULSE_ELIMIT), "size or count limit exceeded");
	CHECK_STR(stackpulse_strerror(STACKPULSE_EBUILDID), "build-id mismatch");
	CHECK_STR(stackpulse_strerror(STACKPULSE_ESTATE), "invalid call in the current state");
	CHECK_STR(stackpulse_strerror(STACKPULSE_ECOMPRESS), "compression failed");
	CHECK_STR(stackpulse_strerror(STACKPULSE_ENOTFOUND), "not found");
	CHECK_STR(stackpulse_strerror(STACKPULSE_EINTERNAL), "internal error");
	for (size_t i = 0; i < NCODES; i++) {
		CHECK(lib_codes[i] < -4096); /* Never collides with -errno. */
		for (size_t j = i + 1; j < NCODES; j++)
			CHECK(strcmp(stackpulse_strerror(lib_codes[i]),
			             stackpulse_strerror(lib_codes[j])) != 0);
	}
}

SP_TEST(errno_codes_have_messages)
{
	static const struct {
		int err;
		const char *msg;
	} known[] = {
		{ EPERM, "operation not permitted" },
		{ ENOENT, "no such file or directory" },
		{ ESRCH, "no such process" },
		{ EINTR, "interrupted" },
		{ EIO, "input/output error" },
		{ E2BIG, "argument list too long" },
		{ EBADF, "bad file descriptor" },
		{ ECHILD, "no child processes" },
		{ EAGAIN, "resource temporarily unavailable" },
		{ ENOMEM, "out of memory" },
		{ EACCES, "permission denied" },
		{ EFAULT, "bad address" },
		{ EBUSY, "device or resource busy" },
		{ EEXIST, "file exists" },
		{ ENODEV, "no such device" },
		{ ENOTDIR, "not a directory" },
		{ EISDIR, "is a directory" },
		{ EINVAL, "invalid argument" },
		{ EMFILE, "too many open files" },
		{ EFBIG, "file too large" },
		{ ENOSPC, "no space left on device" },
		{ ESPIPE, "illegal seek" },
		{ EROFS, "read-only file system" },
		{ EPIPE, "broken pipe" },
		{ ERANGE, "result out of range" },
		{ ENAMETOOLONG, "file name too long" },
		{ ENOSYS, "function not implemented" },
		{ ELOOP, "too many levels of symbolic links" },
		{ ENODATA, "no data available" },
		{ EOVERFLOW, "value too large" },
		{ EOPNOTSUPP, "operation not supported" },
		{ ETIMEDOUT, "timed out" },
		{ ENOEXEC, "exec format error" },
	};
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		CHECK_STR(stackpulse_strerror(-known[i].err), known[i].msg);
	CHECK_STR(stackpulse_strerror(-EHOSTDOWN), "system error");
	CHECK_STR(stackpulse_strerror(-4095), "system error");
}

SP_TEST(unknown_codes)
{
	CHECK_STR(stackpulse_strerror(1), "unknown error");
	CHECK_STR(stackpulse_strerror(12345), "unknown error");
	CHECK_STR(stackpulse_strerror(-4096), "unknown error");
	CHECK_STR(stackpulse_strerror(-10000), "unknown error");
	CHECK_STR(stackpulse_strerror(-10012), "unknown error");
	CHECK_STR(stackpulse_strerror(INT32_MIN), "unknown error");
}

SP_TEST(sp_error_records_code_and_detail)
{
	sp_error_clear();
	CHECK_STR(stackpulse_last_error(), "");
	CHECK_EQ(stackpulse_last_error_code(), 0);
	CHECK_EQ(sp_error(STACKPULSE_ECHECKSUM, "chunk %d: crc %08x", 3, 0xdeadbeefu),
	         STACKPULSE_ECHECKSUM);
	CHECK_EQ(stackpulse_last_error_code(), STACKPULSE_ECHECKSUM);
	CHECK_STR(stackpulse_last_error(), "chunk 3: crc deadbeef");
	CHECK_EQ(sp_error(-ENOENT, "open %s", "/nope"), -ENOENT);
	CHECK_STR(stackpulse_last_error(), "open /nope");
	sp_error_clear();
	CHECK_STR(stackpulse_last_error(), "");
	CHECK_EQ(stackpulse_last_error_code(), 0);
}

SP_TEST(sp_error_context_prefixes)
{
	sp_error(STACKPULSE_ETRUNCATED, "sample: need 4 bytes");
	CHECK_EQ(sp_error_context(STACKPULSE_ETRUNCATED, "chunk %u", 2u), STACKPULSE_ETRUNCATED);
	CHECK_STR(stackpulse_last_error(), "chunk 2: sample: need 4 bytes");
	CHECK_EQ(sp_error_context(STACKPULSE_EFORMAT, "file %s", "a.spool"), STACKPULSE_EFORMAT);
	CHECK_STR(stackpulse_last_error(), "file a.spool: chunk 2: sample: need 4 bytes");
	CHECK_EQ(stackpulse_last_error_code(), STACKPULSE_EFORMAT);
}

SP_TEST(long_details_are_truncated_not_overflowed)
{
	char big[2000];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	sp_error(STACKPULSE_EFORMAT, "%s", big);
	size_t len = strlen(stackpulse_last_error());
	CHECK(len > 100 && len < sizeof(big) - 1);
	sp_error_context(STACKPULSE_EFORMAT, "%s", big);
	CHECK_EQ(strlen(stackpulse_last_error()), len);
	sp_error(STACKPULSE_EFORMAT, "short");
	sp_error_context(STACKPULSE_EFORMAT, "%s", big);
	CHECK_EQ(strlen(stackpulse_last_error()), len);
	CHECK(strncmp(stackpulse_last_error(), "aaaa", 4) == 0);
}

static void *other_thread(void *arg)
{
	(void)arg;
	int clean = stackpulse_last_error()[0] == '\0' && stackpulse_last_error_code() == 0;
	sp_error(STACKPULSE_ELIMIT, "from the other thread");
	return (void *)(uintptr_t)clean;
}

SP_TEST(detail_is_per_thread)
{
	sp_error(STACKPULSE_EVERSION, "main thread");
	pthread_t t;
	void *ret = NULL;
	REQUIRE_EQ(pthread_create(&t, NULL, other_thread, NULL), 0);
	REQUIRE_EQ(pthread_join(t, &ret), 0);
	CHECK(ret == (void *)1);
	CHECK_STR(stackpulse_last_error(), "main thread");
	CHECK_EQ(stackpulse_last_error_code(), STACKPULSE_EVERSION);
}
