/* Spools recorded in the aarch64 guest (`zig build test-arm64-vm` passes
 * their directory as SP_ARM64_OUT) symbolize on this x86_64 host with no
 * arm64 file here: offline, from the tables embedded in the spools. */
#include <stdlib.h>

#include "arm64_util.h"

static void fold(const char *name, a64_folded *f)
{
	const char *dir = getenv("SP_ARM64_OUT");
	REQUIRE(dir && *dir);
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s.spool", dir, name);
	a64_fold(path, STACKPULSE_SYM_OFFLINE, f);
	fprintf(stderr, "    %s: %zu samples\n", path, f->n);
}

/* Native frames of every build, named as in the guest. */
SP_TEST(guest_native_spools_symbolize_here)
{
	static const char *const names[] = { "cfi", "fp", "pac", "threads", "forkexec" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		a64_folded f;
		fold(names[i], &f);
		size_t in_leaf = 0;
		/* Worker threads start at thread_main, the others at main. */
		const char *chain =
		        i == 3 ? "outer;middle;leaf_spin" : "main;outer;middle;leaf_spin";
		size_t good = a64_leaf(&f, "leaf_spin", chain, &in_leaf);
		CHECK(in_leaf >= 10);
		CHECK(good * 100 >= in_leaf * 95);
		a64_free(&f);
	}
}

SP_TEST(guest_kernel_and_vdso_names_symbolize_here)
{
	a64_folded f;
	fold("kernel", &f);
	CHECK(a64_count(&f, "main;syscall_loop;") >= 10);
	CHECK(a64_count(&f, "k:el0_svc") >= 10);
	a64_free(&f);
	fold("vdso", &f);
	CHECK(a64_count(&f, "main;vdso_loop;vdso:__kernel_clock_gettime") >= 10);
	CHECK_EQ(a64_count(&f, "vdso:[vdso]"), 0);
	a64_free(&f);
}

SP_TEST(guest_python_spool_symbolizes_here)
{
	a64_folded f;
	fold("python", &f);
	CHECK(a64_count(&f, "py:py_entry;py:py_middle;py:py_leaf") >= 10);
	a64_free(&f);
}
