/* A recorder SIGKILLed in the middle of a recording leaves a spool that
 * reads back: truncated, with every complete chunk valid. */
#include <errno.h>

#include "rec_driver.h"

SP_TEST(sigkilled_recorder_leaves_a_valid_truncated_spool)
{
	const char *bin = rec_target("ladder", NULL);
	char env[2048], spool[600], pidfile[600];
	snprintf(spool, sizeof(spool), "%s/killed.spool", sp_test_tmpdir());
	snprintf(pidfile, sizeof(pidfile), "%s/killed.pid", sp_test_tmpdir());
	snprintf(env, sizeof(env),
	         "SP_REC_DRIVER=spawn SP_REC_SPOOL=%s SP_REC_TARGET=%s SP_REC_ARG=6 "
	         "SP_REC_CHUNK=512 SP_REC_PIDFILE=%s",
	         spool, bin, pidfile);
	char self[512];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	REQUIRE(n > 0);
	self[n] = '\0';
	pid_t rp = fork();
	if (rp == 0) {
		char cmd[4096];
		snprintf(cmd, sizeof(cmd), "exec env %s '%s' >/dev/null 2>&1", env, self);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	usleep(2500000);
	kill(rp, SIGKILL);
	waitpid(rp, NULL, 0);
	/* The target keeps running; end it. */
	FILE *f = fopen(pidfile, "r");
	int tpid = 0;
	if (f) {
		char line[64];
		if (fgets(line, sizeof(line), f))
			tpid = (int)strtol(line, NULL, 10);
		fclose(f);
	}
	CHECK(tpid > 0);
	if (tpid > 0)
		kill(tpid, SIGKILL);
	stackpulse_spool *sp;
	REQUIRE_OK(stackpulse_spool_open(spool, NULL, &sp));
	const struct stackpulse_spool_meta *m = stackpulse_spool_meta(sp);
	printf("killed spool: truncated %d, %u chunks, %llu samples\n", m->truncated, m->chunks,
	       (unsigned long long)m->samples);
	CHECK_EQ(m->truncated, 1);
	CHECK(m->chunks >= 2);
	stackpulse_sample_iter *it;
	REQUIRE_OK(stackpulse_sample_iter_new(sp, &it));
	const struct stackpulse_sample *s;
	int count = 0, full = 0, rc;
	const char *seq[] = { "leaf", "middle", "entry", "main" };
	while ((rc = stackpulse_sample_iter_next(it, &s)) == 1) {
		count++;
		const char *names[256];
		uint32_t d = rec_stack_names(sp, s->stack, names, 256);
		full += rec_has_seq(names, d, seq, 4);
	}
	CHECK_EQ(rc, 0);
	stackpulse_sample_iter_free(it);
	CHECK(count > 30);
	CHECK_EQ((uint64_t)count, m->samples);
	CHECK(full * 100 > count * 90);
	stackpulse_spool_close(sp);
}
