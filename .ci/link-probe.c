/* The small program .ci/check-link.sh, cross-use.sh and deb.sh build
 * against an installed library: it calls into it, checks an error
 * message comes back, and prints the version. */
#include <stdio.h>
#include <string.h>
#include "stackpulse.h"
int main(void)
{
	stackpulse_spool *s = NULL;
	stackpulse_spool_open_opts o = STACKPULSE_SPOOL_OPEN_OPTS;
	o.buf = "not a spool";
	o.len = 11;
	int rc = stackpulse_spool_open(NULL, &o, &s);
	if (rc == 0 || strlen(stackpulse_last_error()) == 0)
		return 1;
	printf("stackpulse %s: %s\n", stackpulse_version(), stackpulse_strerror(rc));
	return 0;
}
