/* The harness's no-skip mode: with SP_NO_SKIP=1 a skip is a failure, and a
 * machine-property skip (sp_test_skip_env) stays a skip. Runs this binary
 * again (/proc/self/exe) on the two probe tests, which act only when
 * SP_HARNESS_PROBE is set. */
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"

SP_TEST(probe_skip)
{
	if (getenv("SP_HARNESS_PROBE"))
		sp_test_skip("probe: a requirement is missing");
}

SP_TEST(probe_skip_env)
{
	if (getenv("SP_HARNESS_PROBE"))
		sp_test_skip_env("probe: a machine property");
}

/* Exit status of this binary run on @p test with SP_NO_SKIP=@p no_skip. */
static int run_probe(const char *test, const char *no_skip)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd),
	         "SP_HARNESS_PROBE=1 SP_NO_SKIP=%s \"$(readlink /proc/%d/exe)\" %s >/dev/null 2>&1",
	         no_skip, (int)getpid(), test);
	return sp_test_run(cmd);
}

SP_TEST(no_skip_mode_turns_skips_into_failures)
{
	if (sp_test_under_valgrind())
		sp_test_skip("/proc/self/exe is valgrind's tool here, not this test binary");
	CHECK_EQ(run_probe("probe_skip", "0"), 0);     /* a skip passes */
	CHECK_EQ(run_probe("probe_skip", "1"), 1);     /* ... unless no-skip mode */
	CHECK_EQ(run_probe("probe_skip_env", "1"), 0); /* a machine property stays a skip */
	CHECK_EQ(run_probe("probe_skip_env", "0"), 0);
}
