/* One libdw answer serves a whole range of offsets in symbol caches and
 * embedded tables (its line row inside its innermost scope, or its symbol
 * when there is no DWARF). Check that claim against exact lookups at both
 * ends and the middle of every range: on a test-built program with nested
 * inlines and lexical blocks, on its stripped copy (symbol ranges), and on
 * libc when its debug file is installed. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sym_fixture.h"
#include "symbolize/dbgmod.h"

static const char prog_src[] = "#include <stdio.h>\n"
                               "#include <stdlib.h>\n"
                               "volatile int sink;\n"
                               "static inline __attribute__((always_inline)) int leaf(int x)\n"
                               "{\n"
                               "\tint r = x * 3;\n"
                               "\tif (r & 1) {\n"
                               "\t\tint t = r ^ 5;\n"
                               "\t\tsink = t;\n"
                               "\t}\n"
                               "\treturn r + 1;\n"
                               "}\n"
                               "static inline __attribute__((always_inline)) int mid(int x)\n"
                               "{\n"
                               "\tint s = 0;\n"
                               "\tfor (int i = 0; i < x; i++)\n"
                               "\t\ts += leaf(i);\n"
                               "\treturn s;\n"
                               "}\n"
                               "__attribute__((noinline)) int outer(int n)\n"
                               "{\n"
                               "\tint acc = 0;\n"
                               "\tfor (int k = 0; k < n; k++) {\n"
                               "\t\tint v = mid(k);\n"
                               "\t\tif (v > 100)\n"
                               "\t\t\tacc += leaf(v);\n"
                               "\t\telse\n"
                               "\t\t\tacc -= v;\n"
                               "\t}\n"
                               "\treturn acc;\n"
                               "}\n"
                               "__attribute__((noinline)) void other(char *buf, int n)\n"
                               "{\n"
                               "\tsnprintf(buf, 64, \"%d\", outer(n));\n"
                               "}\n"
                               "int main(int argc, char **argv)\n"
                               "{\n"
                               "\tchar buf[64];\n"
                               "\tother(buf, argc + atoi(argc > 1 ? argv[1] : \"3\"));\n"
                               "\tputs(buf);\n"
                               "\treturn 0;\n"
                               "}\n";

static int same(const sp_symcache_frame *a, int na, const sp_symcache_frame *b, int nb)
{
	if (na != nb)
		return 0;
	for (int i = 0; i < na; i++) {
		if ((a[i].name == NULL) != (b[i].name == NULL) ||
		    (a[i].name && strcmp(a[i].name, b[i].name) != 0))
			return 0;
		if ((a[i].file == NULL) != (b[i].file == NULL) ||
		    (a[i].file && strcmp(a[i].file, b[i].file) != 0) || a[i].line != b[i].line)
			return 0;
	}
	return 1;
}

/* Checks every range found from offsets [from, to) stepping by @p step.
 * Returns the number of ranges longer than one byte. */
static int check_ranges(const char *path, uint64_t from, uint64_t to, uint64_t step)
{
	uint8_t bid[64];
	uint32_t bid_len;
	fx_build_id(path, bid, &bid_len);
	sp_dbg_config cfg;
	REQUIRE_OK(sp_dbg_config_init(&cfg, NULL, 0, NULL));
	sp_dbgmod *ranged = NULL, *exact = NULL;
	REQUIRE_OK(sp_dbgmod_open(path, bid, bid_len, &cfg, &ranged));
	REQUIRE_OK(sp_dbgmod_open(path, bid, bid_len, &cfg, &exact));
	sp_strpool pool;
	sp_strpool_init(&pool);
	int wide = 0, bad = 0, checked = 0;
	for (uint64_t off = from; off < to && bad < 5; off += step) {
		sp_symcache_frame fr[SP_SYMCACHE_MAX_FRAMES], ex[SP_SYMCACHE_MAX_FRAMES];
		uint64_t at;
		uint32_t len;
		int n = sp_dbgmod_resolve_range(ranged, off, &pool, 0, fr, SP_SYMCACHE_MAX_FRAMES,
		                                &at, &len);
		REQUIRE(n > 0);
		REQUIRE(at <= off && off - at < len);
		wide += len > 1;
		uint64_t probes[3] = { at, at + len / 2, at + len - 1 };
		for (int p = 0; p < 3; p++) {
			int m = sp_dbgmod_resolve(exact, probes[p], &pool, 0, ex,
			                          SP_SYMCACHE_MAX_FRAMES);
			checked++;
			if (!same(fr, n, ex, m)) {
				bad++;
				fprintf(stderr,
				        "      %s: range [0x%llx, +%u) from 0x%llx: 0x%llx differs "
				        "(%s:%u vs %s:%u)\n",
				        path, (unsigned long long)at, len, (unsigned long long)off,
				        (unsigned long long)probes[p],
				        fr[n - 1].name ? fr[n - 1].name : "?", fr[0].line,
				        ex[m - 1].name ? ex[m - 1].name : "?", ex[0].line);
			}
		}
	}
	fprintf(stderr, "    %s: %d probes, %d ranges wider than a byte\n", path, checked, wide);
	CHECK_EQ(bad, 0);
	sp_strpool_free(&pool);
	sp_dbgmod_free(ranged);
	sp_dbgmod_free(exact);
	sp_dbg_config_free(&cfg);
	return wide;
}

/* File offsets of the .text section (readelf). */
static void text_range(const char *path, uint64_t *from, uint64_t *to)
{
	char cmd[1024], line[512];
	snprintf(cmd, sizeof(cmd), "readelf -SW '%s' | awk '$2 == \".text\" { print $5, $6 }'",
	         path);
	FILE *p = popen(cmd, "r");
	REQUIRE(p);
	unsigned long long off = 0, size = 0;
	int ok = fgets(line, sizeof(line), p) && sscanf(line, "%llx %llx", &off, &size) == 2;
	pclose(p);
	REQUIRE(ok && size > 0);
	*from = off;
	*to = off + size;
}

SP_TEST(range_answers_match_exact_lookups)
{
	if (!fx_have("gcc") || !fx_have("readelf") || !fx_have("objcopy"))
		sp_test_skip("gcc, readelf or objcopy not installed");
	char src[512], bin[512], stripped[512];
	fx_path(src, sizeof(src), "prog.c");
	fx_path(bin, sizeof(bin), "prog");
	fx_path(stripped, sizeof(stripped), "prog.nodwarf");
	fx_write_file(src, prog_src);
	fx_sh("gcc -O2 -g -o '%s' '%s'", bin, src);
	/* Symbols but no DWARF: ranges come from the symbol table. */
	fx_sh("objcopy --strip-debug '%s' '%s'", bin, stripped);
	uint64_t from, to;
	text_range(bin, &from, &to);
	CHECK(check_ranges(bin, from, to, 1) > 0);
	CHECK(check_ranges(stripped, from, to, 1) > 0);
	/* A big real library, when its debug file is installed. */
	const char *libc = "/usr/lib/x86_64-linux-gnu/libc.so.6";
	uint8_t bid[64];
	uint32_t bid_len;
	char hex[129], dbg[512];
	if (access(libc, R_OK) == 0) {
		fx_build_id(libc, bid, &bid_len);
		sp_hex(bid, bid_len, hex);
		snprintf(dbg, sizeof(dbg), "/usr/lib/debug/.build-id/%.2s/%s.debug", hex, hex + 2);
		if (access(dbg, R_OK) == 0) {
			text_range(libc, &from, &to);
			CHECK(check_ranges(libc, from, to, 997) > 0);
		} else {
			fprintf(stderr, "    (libc debug file not installed: libc part skipped)\n");
		}
	}
}
