/* Syscall-heavy: sys_loop() writes to /dev/null and reads /proc/self/stat;
 * argv[1] = seconds. */
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void sys_loop(double secs)
{
	static char buf[65536];
	int null = open("/dev/null", O_WRONLY);
	double end = now() + secs;
	while (now() < end) {
		for (int i = 0; i < 50; i++) {
			int fd = open("/proc/self/stat", O_RDONLY);
			if (fd >= 0) {
				ssize_t r = read(fd, buf, sizeof(buf));
				(void)r;
				close(fd);
			}
			ssize_t w = write(null, buf, sizeof(buf));
			(void)w;
		}
	}
	close(null);
}

int main(int argc, char **argv)
{
	sys_loop(argc > 1 ? atof(argv[1]) : 1.0);
	return 0;
}
