/* AFL++ persistent-mode driver for an LLVMFuzzerTestOneInput harness, used
 * when AFL++'s libAFLDriver.a is not installed. Built with afl-clang-fast,
 * which defines the __AFL_* macros; any other compiler gets a driver that
 * runs the harness once on stdin. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

#ifdef __AFL_FUZZ_TESTCASE_LEN
__AFL_FUZZ_INIT();

int main(int argc, char **argv)
{
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	__AFL_INIT();
	unsigned char *buf = __AFL_FUZZ_TESTCASE_BUF;
	while (__AFL_LOOP(10000)) {
		size_t len = (size_t)__AFL_FUZZ_TESTCASE_LEN;
		LLVMFuzzerTestOneInput(buf, len);
	}
	return 0;
}
#else
int main(int argc, char **argv)
{
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	static uint8_t buf[1 << 20];
	size_t len = 0;
	ssize_t n;
	while (len < sizeof(buf) && (n = read(0, buf + len, sizeof(buf) - len)) > 0)
		len += (size_t)n;
	LLVMFuzzerTestOneInput(buf, len);
	return 0;
}
#endif
