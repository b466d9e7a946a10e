#include "error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define SP_ERROR_DETAIL_MAX 512

static _Thread_local char last_detail[SP_ERROR_DETAIL_MAX];
static _Thread_local int last_code;
_Thread_local int sp_error_pending SP_TLS_INITIAL_EXEC;

const char *stackpulse_version(void)
{
	return "0.3.0";
}

const char *stackpulse_strerror(int code)
{
	switch (code) {
	case STACKPULSE_OK: return "success";
	case STACKPULSE_EFORMAT: return "malformed input";
	case STACKPULSE_ETRUNCATED: return "input is truncated";
	case STACKPULSE_EVERSION: return "unsupported format version";
	case STACKPULSE_ECHECKSUM: return "checksum mismatch";
	case STACKPULSE_EUNSUPPORTED: return "not supported";
	case STACKPULSE_ELIMIT: return "size or count limit exceeded";
	case STACKPULSE_EBUILDID: return "build-id mismatch";
	case STACKPULSE_ESTATE: return "invalid call in the current state";
	case STACKPULSE_ECOMPRESS: return "compression failed";
	case STACKPULSE_ENOTFOUND: return "not found";
	case STACKPULSE_EINTERNAL: return "internal error";
	default: break;
	}
	if (code < 0 && code > -4096) {
		/* strerror() is not thread-safe; keep a fixed table of what we use. */
		switch (-code) {
		case EPERM: return "operation not permitted";
		case ENOENT: return "no such file or directory";
		case ESRCH: return "no such process";
		case EINTR: return "interrupted";
		case EIO: return "input/output error";
		case E2BIG: return "argument list too long";
		case EBADF: return "bad file descriptor";
		case ECHILD: return "no child processes";
		case EAGAIN: return "resource temporarily unavailable";
		case ENOMEM: return "out of memory";
		case EACCES: return "permission denied";
		case EFAULT: return "bad address";
		case EBUSY: return "device or resource busy";
		case EEXIST: return "file exists";
		case ENODEV: return "no such device";
		case ENOTDIR: return "not a directory";
		case EISDIR: return "is a directory";
		case EINVAL: return "invalid argument";
		case EMFILE: return "too many open files";
		case EFBIG: return "file too large";
		case ENOSPC: return "no space left on device";
		case ESPIPE: return "illegal seek";
		case EROFS: return "read-only file system";
		case EPIPE: return "broken pipe";
		case ERANGE: return "result out of range";
		case ENAMETOOLONG: return "file name too long";
		case ENOSYS: return "function not implemented";
		case ELOOP: return "too many levels of symbolic links";
		case ENODATA: return "no data available";
		case EOVERFLOW: return "value too large";
		case EOPNOTSUPP: return "operation not supported";
		case ETIMEDOUT: return "timed out";
		case ENOEXEC: return "exec format error";
		case ECONNREFUSED: return "connection refused";
		case EHOSTUNREACH: return "host unreachable";
		case EPROTO: return "protocol error";
		default: return "system error";
		}
	}
	return "unknown error";
}

const char *stackpulse_last_error(void)
{
	return last_detail;
}

int stackpulse_last_error_code(void)
{
	return last_code;
}

int sp_error(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(last_detail, sizeof(last_detail), fmt, ap);
	va_end(ap);
	last_code = code;
	sp_error_pending = 1;
	return code;
}

int sp_error_context(int code, const char *fmt, ...)
{
	char prefix[SP_ERROR_DETAIL_MAX];
	char old[SP_ERROR_DETAIL_MAX];
	va_list ap;

	memcpy(old, last_detail, sizeof(old));
	va_start(ap, fmt);
	(void)vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	(void)snprintf(last_detail, sizeof(last_detail), "%s: %s", prefix, old);
	last_code = code;
	sp_error_pending = 1;
	return code;
}

void sp_error_clear(void)
{
	sp_error_pending = 0;
	last_detail[0] = '\0';
	last_code = 0;
}
