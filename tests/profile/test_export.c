/* Exporters checked by real consumers: `go tool pprof` reads our pprof,
 * python3's json and XML parsers check the Firefox profile and the SVG,
 * and headless Chromium renders the SVG. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../examples/report_top.h"
#include "common/alloc.h"
#include "harness.h"
#include "stackpulse.h"
#include "fields.h"
#include "synth.h"

static stackpulse_profile *export_fixture(sp_buf *mem, stackpulse_spool **spool)
{
	*spool = syn_spool(mem, NULL);
	return syn_profile(*spool, 0, STACKPULSE_VIEW_MIXED);
}

SP_TEST(pprof_matches_go_tool_pprof_top)
{
	if (!sp_test_have_program("go"))
		sp_test_skip("go is not installed (Debian golang-go provides `go tool pprof`)");
	sp_buf mem;
	stackpulse_spool *s;
	stackpulse_profile *p = export_fixture(&mem, &s);
	char path[512], out[512], cmd[2048];
	const char *tmp = sp_test_tmpdir();
	snprintf(path, sizeof(path), "%s/profile.pb.gz", tmp);
	snprintf(out, sizeof(out), "%s/pprof-top.txt", tmp);
	REQUIRE_OK(stackpulse_export_to_path(p, STACKPULSE_EXPORT_PPROF, NULL, path));
	size_t len = 0;
	char *raw = sp_test_read_file(path, &len);
	REQUIRE(raw != NULL);
	CHECK(len > 20 && (unsigned char)raw[0] == 0x1f && (unsigned char)raw[1] == 0x8b);
	free(raw);

	snprintf(cmd, sizeof(cmd),
	         "cd %s && mkdir -p home gocache gopath && HOME=%s/home GOCACHE=%s/gocache "
	         "GOPATH=%s/gopath GOFLAGS= GOTOOLCHAIN=local go tool pprof -top -nodecount=20 %s "
	         ">%s 2>%s.err",
	         tmp, tmp, tmp, tmp, path, out, out);
	int rc = sp_test_run(cmd);
	char *text = sp_test_read_file(out, NULL);
	REQUIRE(text != NULL);
	if (rc != 0) {
		char errp[600];
		snprintf(errp, sizeof(errp), "%s.err", out);
		char *err = sp_test_read_file(errp, NULL);
		fprintf(stderr, "    go tool pprof failed (%d): %s\n", rc, err ? err : "");
		free(err);
	}
	REQUIRE_EQ(rc, 0);

	struct sp_top top;
	REQUIRE(sp_top_compute(p, &top) == 0);
	CHECK_EQ(top.total, 15);
	CHECK(strstr(text, "do_syscall_64") != NULL);
	CHECK(strstr(text, "<module>") != NULL);
	/* Parse "flat flat% sum% cum cum% name" rows after the header. */
	char *line = strstr(text, "flat%");
	REQUIRE(line != NULL);
	line = strchr(line, '\n');
	int rows = 0, flat_rows = 0, ours_flat = 0;
	while (line && *++line) {
		char *end = strchr(line, '\n');
		if (end)
			*end = '\0';
		long long flat = 0, cum = 0;
		char *fld[5], *name = NULL;
		if (split_fields(line, fld, 5, &name) == 0 && to_ll(fld[0], &flat) == 0 &&
		    to_ll(fld[3], &cum) == 0 && *name) {
			char *inl = strstr(name, " (inline)");
			if (inl)
				*inl = '\0';
			int found = 0;
			for (size_t i = 0; i < top.n; i++) {
				if (strcmp(stackpulse_profile_string(p, top.rows[i].name), name) ==
				    0) {
					found = 1;
					CHECK_EQ(flat, top.rows[i].self);
					CHECK_EQ(cum, top.rows[i].total);
				}
			}
			if (!found)
				fprintf(stderr, "    pprof row not in our top table: %s\n", name);
			CHECK(found);
			rows++;
			flat_rows += flat > 0;
		}
		line = end;
	}
	for (size_t i = 0; i < top.n; i++)
		ours_flat += top.rows[i].self > 0;
	CHECK_EQ(rows, (long long)(top.n < 20 ? top.n : 20));
	CHECK_EQ(flat_rows, ours_flat);
	/* The known numbers, so a shared mistake cannot pass. */
	CHECK_STR(stackpulse_profile_string(p, top.rows[0].name), "ladder+0x1200");
	CHECK_EQ(top.rows[0].self, 5);
	CHECK_STR(stackpulse_profile_string(p, top.rows[1].name), "fib");
	CHECK_EQ(top.rows[1].self, 4);
	CHECK_EQ(top.rows[1].total, 4);
	sp_top_free(&top);
	free(text);
	stackpulse_profile_free(p);
	stackpulse_spool_close(s);
	sp_buf_free(&mem);
}

static const char firefox_check_py[] =
        "import json, sys\n"
        "d = json.load(open(sys.argv[1]))\n"
        "m = d['meta']\n"
        "assert isinstance(m['version'], int) and m['interval'] > 0, m\n"
        "for k in ('startTime', 'processType', 'product', 'categories', 'markerSchema'):\n"
        "    assert k in m, k\n"
        "cats = m['categories']\n"
        "for c in cats:\n"
        "    assert isinstance(c['name'], str) and isinstance(c['color'], str)\n"
        "    assert isinstance(c['subcategories'], list) and c['subcategories']\n"
        "catname = [c['name'] for c in cats]\n"
        "for k in ('libs', 'threads', 'processes', 'pausedRanges'):\n"
        "    assert isinstance(d[k], list), k\n"
        "stacks = {}\n"
        "for t in d['threads']:\n"
        "    for k in ('name', 'pid', 'tid', 'processType', 'registerTime', 'markers'):\n"
        "        assert k in t, k\n"
        "    st, ft, ss, sm = t['stackTable'], t['frameTable'], t['stringTable'], t['samples']\n"
        "    assert t['markers']['data'] == [] and 'schema' in t['markers']\n"
        "    fs = ft['schema']\n"
        "    for i, f in enumerate(ft['data']):\n"
        "        assert 0 <= f[fs['location']] < len(ss)\n"
        "        c = f[fs['category']]\n"
        "        assert 0 <= c < len(cats)\n"
        "        assert 0 <= f[fs['subcategory']] < len(cats[c]['subcategories'])\n"
        "        assert f[fs['line']] is None or f[fs['line']] > 0\n"
        "    sc = st['schema']\n"
        "    for i, s in enumerate(st['data']):\n"
        "        p = s[sc['prefix']]\n"
        "        assert p is None or 0 <= p < i, (i, p)\n"
        "        assert 0 <= s[sc['frame']] < len(ft['data'])\n"
        "    sch = sm['schema']\n"
        "    last = -1\n"
        "    for row in sm['data']:\n"
        "        s = row[sch['stack']]\n"
        "        tm = row[sch['time']]\n"
        "        assert tm >= last, (tm, last)\n"
        "        last = tm\n"
        "        names = []\n"
        "        while s is not None:\n"
        "            f = ft['data'][st['data'][s][sc['frame']]]\n"
        "            names.append(ss[f[fs['location']]] + '|' + catname[f[fs['category']]])\n"
        "            s = st['data'][s][sc['prefix']]\n"
        "        key = t['name'] + ':' + ';'.join(reversed(names))\n"
        "        stacks[key] = stacks.get(key, 0) + 1\n"
        "for k in sorted(stacks):\n"
        "    print(k, stacks[k])\n";

SP_TEST(firefox_profile_structure)
{
	if (!sp_test_have_program("python3"))
		sp_test_skip("python3 is not installed");
	sp_buf mem;
	stackpulse_spool *s;
	stackpulse_profile *p = export_fixture(&mem, &s);
	char path[512], py[512], out[512], cmd[2048];
	const char *tmp = sp_test_tmpdir();
	snprintf(path, sizeof(path), "%s/profile.json", tmp);
	snprintf(py, sizeof(py), "%s/check_firefox.py", tmp);
	snprintf(out, sizeof(out), "%s/firefox.txt", tmp);
	REQUIRE_OK(stackpulse_export_to_path(p, STACKPULSE_EXPORT_FIREFOX, NULL, path));
	FILE *f = fopen(py, "w");
	REQUIRE(f != NULL);
	fputs(firefox_check_py, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "python3 %s %s >%s 2>&1", py, path, out);
	int rc = sp_test_run(cmd);
	char *text = sp_test_read_file(out, NULL);
	REQUIRE(text != NULL);
	if (rc != 0)
		fprintf(stderr, "    %s\n", text);
	CHECK_EQ(rc, 0);
	CHECK_STR(text,
	          "ladder:ladder+0x1000 (in ladder)|Native;ladder+0x1100 (in ladder)|Native;"
	          "ladder+0x1200 (in ladder)|Native 5\n"
	          "ladder:ladder+0x1000 (in ladder)|Native;ladder+0x1100 (in ladder)|Native;"
	          "ladder+0x1300 (in ladder)|Native 3\n"
	          "ladder:ladder+0x1000 (in ladder)|Native;ladder+0x1100 (in ladder)|Native;"
	          "ladder+0x1400 (in ladder)|Native 2\n"
	          "ladder:ladder+0x1000 (in ladder)|Native;ladder+0x1100 (in ladder)|Native;"
	          "ladder+0x1400 (in ladder)|Native;entry_SYSCALL_64 (in [kernel.kallsyms])|Kernel;"
	          "do_syscall_64 (in [kernel.kallsyms])|Kernel 1\n"
	          "worker:python3+0x500 (in python3)|Native;<module> (in /tmp/app.py)|Python;"
	          "fib (in /tmp/app.py)|Python;fib (in /tmp/app.py)|Python 4\n");
	free(text);
	stackpulse_profile_free(p);
	stackpulse_spool_close(s);
	sp_buf_free(&mem);
}

static const char svg_check_py[] =
        "import sys, xml.etree.ElementTree as E\n"
        "ns = '{http://www.w3.org/2000/svg}'\n"
        "root = E.parse(sys.argv[1]).getroot()\n"
        "assert root.tag == ns + 'svg'\n"
        "assert root.find(ns + 'script') is not None\n"
        "n = 0\n"
        "for g in root.iter(ns + 'g'):\n"
        "    if g.get('class') != 'f':\n"
        "        continue\n"
        "    n += 1\n"
        "    assert g.find(ns + 'rect') is not None and g.find(ns + 'text') is not None\n"
        "    print(g.get('data-d'), g.find(ns + 'title').text)\n"
        "print('frames', n)\n";

/* Decodes an RGB(A) 8-bit PNG and prints its distinct colours and the
 * share of pixels that differ from the most common one. */
static const char png_check_py[] =
        "import sys, zlib, struct\n"
        "b = open(sys.argv[1], 'rb').read()\n"
        "assert b[:8] == b'\\x89PNG\\r\\n\\x1a\\n'\n"
        "pos, idat = 8, b''\n"
        "while pos < len(b):\n"
        "    n, = struct.unpack('>I', b[pos:pos+4]); t = b[pos+4:pos+8]; d = b[pos+8:pos+8+n]\n"
        "    if t == b'IHDR': w, h, depth, ctype = struct.unpack('>IIBB', d[:10])\n"
        "    if t == b'IDAT': idat += d\n"
        "    pos += 12 + n\n"
        "assert depth == 8 and ctype in (2, 6), (depth, ctype)\n"
        "bpp = 3 if ctype == 2 else 4\n"
        "raw = zlib.decompress(idat); stride = w * bpp; prev = bytearray(stride); out = []\n"
        "for y in range(h):\n"
        "    ft = raw[y*(stride+1)]; line = bytearray(raw[y*(stride+1)+1:(y+1)*(stride+1)])\n"
        "    for i in range(stride):\n"
        "        a = line[i-bpp] if i >= bpp else 0; c = prev[i-bpp] if i >= bpp else 0; up = "
        "prev[i]\n"
        "        if ft == 1: line[i] = (line[i] + a) & 255\n"
        "        elif ft == 2: line[i] = (line[i] + up) & 255\n"
        "        elif ft == 3: line[i] = (line[i] + (a + up) // 2) & 255\n"
        "        elif ft == 4:\n"
        "            p = a + up - c; pa, pb, pc = abs(p - a), abs(p - up), abs(p - c)\n"
        "            line[i] = (line[i] + (a if pa <= pb and pa <= pc else up if pb <= pc else c)) "
        "& 255\n"
        "    out.append(bytes(line)); prev = line\n"
        "cnt = {}\n"
        "for line in out:\n"
        "    for i in range(0, stride, bpp * 2):\n"
        "        k = line[i:i+3]; cnt[k] = cnt.get(k, 0) + 1\n"
        "total = sum(cnt.values()); top = max(cnt.values())\n"
        "print(len(cnt), round(100.0 * (total - top) / total, 2))\n";

/* Appended to a copy of the SVG: clicks "ladder+0x1400" once loaded and
 * writes every frame's geometry into the document for --dump-dom. */
static const char zoom_script[] =
        "<script type=\"text/ecmascript\"><![CDATA[\n"
        "window.addEventListener('load', function () {\n"
        "  var fr = document.getElementsByClassName('f'), out = [];\n"
        "  for (var i = 0; i < fr.length; i++)\n"
        "    if (fr[i].getElementsByTagName('title')[0].textContent.indexOf('ladder+0x1400 ') === "
        "0)\n"
        "      fr[i].dispatchEvent(new MouseEvent('click'));\n"
        "  for (var i = 0; i < fr.length; i++) {\n"
        "    var r = fr[i].getElementsByTagName('rect')[0];\n"
        "    var t = fr[i].getElementsByTagName('title')[0].textContent;\n"
        "    out.push(t.substring(0, t.lastIndexOf(' (')) + '=' + (fr[i].style.display === 'none' "
        "?\n"
        "      'hidden' : r.getAttribute('x') + ',' + r.getAttribute('width')));\n"
        "  }\n"
        "  document.getElementById('details').textContent = 'RESULT |' + out.join('|') + '|';\n"
        "});\n"
        "]]></script>\n</svg>\n";

SP_TEST(svg_flamegraph_parses_and_renders)
{
	if (!sp_test_have_program("python3"))
		sp_test_skip("python3 is not installed");
	sp_buf mem;
	stackpulse_spool *s;
	stackpulse_profile *p = export_fixture(&mem, &s);
	char path[512], py[512], out[512], cmd[4096];
	const char *tmp = sp_test_tmpdir();
	snprintf(path, sizeof(path), "%s/flame.svg", tmp);
	snprintf(py, sizeof(py), "%s/check_svg.py", tmp);
	snprintf(out, sizeof(out), "%s/svg.txt", tmp);
	stackpulse_export_opts eo = STACKPULSE_EXPORT_OPTS;
	eo.title = "ladder <&> \"test\"";
	REQUIRE_OK(stackpulse_export_to_path(p, STACKPULSE_EXPORT_SVG, &eo, path));
	FILE *f = fopen(py, "w");
	REQUIRE(f != NULL);
	fputs(svg_check_py, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "python3 %s %s >%s 2>&1", py, path, out);
	int rc = sp_test_run(cmd);
	char *text = sp_test_read_file(out, NULL);
	REQUIRE(text != NULL);
	if (rc != 0)
		fprintf(stderr, "    %s\n", text);
	REQUIRE_EQ(rc, 0);
	/* Depth and title of each expected frame. */
	static const char *const want[] = {
		"0 all (15 samples, 100.00%)",
		"1 ladder (15 samples, 100.00%)",
		"2 ladder+0x1000 (11 samples, 73.33%)",
		"4 ladder+0x1200 (5 samples, 33.33%)",
		"4 ladder+0x1400 (3 samples, 20.00%)",
		"5 entry_SYSCALL_64_[k] (1 sample, 6.67%)",
		"6 do_syscall_64_[k] (1 sample, 6.67%)",
		"2 python3+0x500 (4 samples, 26.67%)",
		"3 <module> (/tmp/app.py) (4 samples, 26.67%)",
		"5 fib (/tmp/app.py) (4 samples, 26.67%)",
		"frames 13",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		if (!strstr(text, want[i]))
			fprintf(stderr, "    missing: %s\n", want[i]);
		CHECK(strstr(text, want[i]) != NULL);
	}
	free(text);
	char *svg = sp_test_read_file(path, NULL);
	REQUIRE(svg != NULL);
	CHECK(strstr(svg, "ladder &lt;&amp;&gt; &quot;test&quot;") != NULL);
	free(svg);

	/* Render once in headless Chromium and check the picture is not blank. */
	const char *browser = sp_test_have_program("chromium")           ? "chromium"
	                      : sp_test_have_program("chromium-browser") ? "chromium-browser"
	                                                                 : NULL;
	if (!browser)
		sp_test_skip("chromium is not installed (apt-get install -y chromium)");
	char png[512], png_py[512], log[512];
	snprintf(png, sizeof(png), "%s/flame.png", tmp);
	snprintf(png_py, sizeof(png_py), "%s/check_png.py", tmp);
	snprintf(log, sizeof(log), "%s/chromium.log", tmp);
	snprintf(cmd, sizeof(cmd),
	         "cd %s && HOME=%s timeout 90 %s --headless --no-sandbox --disable-gpu "
	         "--no-first-run --user-data-dir=%s/chromium-profile --enable-logging=stderr "
	         "--screenshot=%s --window-size=1200,800 file://%s >%s 2>&1",
	         tmp, tmp, browser, tmp, png, path, log);
	rc = sp_test_run(cmd);
	struct stat sb;
	if (rc != 0 || stat(png, &sb) != 0) {
		char *l = sp_test_read_file(log, NULL);
		fprintf(stderr, "    chromium exit %d: %.2000s\n", rc, l ? l : "");
		free(l);
		sp_test_skip("headless chromium could not render here");
	}
	char *l = sp_test_read_file(log, NULL);
	if (l && strstr(l, "Uncaught"))
		fprintf(stderr, "    script error in the SVG: %.2000s\n", l);
	CHECK(l && !strstr(l, "Uncaught")); /* The inline script loads without errors. */
	free(l);
	/* Click a frame in the real browser: it must fill the width, its
	 * siblings hide, and its children scale with it. */
	char zoom_svg[512];
	snprintf(zoom_svg, sizeof(zoom_svg), "%s/zoom.svg", tmp);
	svg = sp_test_read_file(path, NULL);
	REQUIRE(svg != NULL);
	char *tail = strstr(svg, "</svg>");
	REQUIRE(tail != NULL);
	*tail = '\0';
	f = fopen(zoom_svg, "w");
	REQUIRE(f != NULL);
	fputs(svg, f);
	fputs(zoom_script, f);
	fclose(f);
	free(svg);
	snprintf(
	        cmd, sizeof(cmd),
	        "cd %s && HOME=%s timeout 90 %s --headless --no-sandbox --disable-gpu "
	        "--no-first-run --user-data-dir=%s/chromium-profile --dump-dom file://%s >%s 2>>%s",
	        tmp, tmp, browser, tmp, zoom_svg, out, log);
	CHECK_EQ(sp_test_run(cmd), 0);
	text = sp_test_read_file(out, NULL);
	REQUIRE(text != NULL);
	CHECK(strstr(text, "RESULT ") != NULL);
	CHECK(strstr(text, "|ladder+0x1400=10.00,1180.00|") != NULL);
	CHECK(strstr(text, "|ladder+0x1200=hidden|") != NULL);
	CHECK(strstr(text, "|do_syscall_64_[k]=796.67,393.33|") != NULL);
	CHECK(strstr(text, "|all=10,1180|") != NULL);
	free(text);

	f = fopen(png_py, "w");
	REQUIRE(f != NULL);
	fputs(png_check_py, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "python3 %s %s >%s 2>&1", png_py, png, out);
	rc = sp_test_run(cmd);
	text = sp_test_read_file(out, NULL);
	REQUIRE(text != NULL);
	int colours = 0;
	double share = 0;
	char *endp = NULL;
	colours = (int)strtol(text, &endp, 10);
	if (endp && endp != text)
		share = strtod(endp, NULL);
	if (rc != 0 || !endp || endp == text)
		fprintf(stderr, "    png check: %s\n", text);
	CHECK_EQ(rc, 0);
	CHECK(colours >= 8); /* Frames in several colours plus text. */
	CHECK(share >= 2.0); /* Not one flat background. */
	free(text);
	stackpulse_profile_free(p);
	stackpulse_spool_close(s);
	sp_buf_free(&mem);
}

static int fail_write(void *ctx, const void *data, size_t len)
{
	(void)data;
	(void)len;
	int *calls = ctx;
	(*calls)++;
	return -ENOSPC;
}

SP_TEST(export_errors)
{
	sp_buf mem;
	stackpulse_spool *s;
	stackpulse_profile *p = export_fixture(&mem, &s);
	int calls = 0;
	for (int fmt = STACKPULSE_EXPORT_FOLDED; fmt <= STACKPULSE_EXPORT_SVG; fmt++) {
		calls = 0;
		CHECK_EQ(stackpulse_export(p, (enum stackpulse_export_format)fmt, NULL, fail_write,
		                           &calls),
		         -ENOSPC);
		CHECK_EQ(calls, 1); /* The first error stops the exporter. */
	}
	CHECK_EQ(stackpulse_export(p, 99, NULL, fail_write, &calls), -EINVAL);
	CHECK_EQ(stackpulse_export(NULL, STACKPULSE_EXPORT_FOLDED, NULL, fail_write, &calls),
	         -EINVAL);
	char path[512];
	snprintf(path, sizeof(path), "%s/no/such/dir/out.svg", sp_test_tmpdir());
	CHECK_EQ(stackpulse_export_to_path(p, STACKPULSE_EXPORT_SVG, NULL, path), -ENOENT);
	CHECK(strstr(stackpulse_last_error(), "no/such/dir") != NULL);
	/* Same profile, same bytes: every format is deterministic. */
	for (int fmt = STACKPULSE_EXPORT_FOLDED; fmt <= STACKPULSE_EXPORT_SVG; fmt++) {
		size_t la, lb;
		char *a = syn_export(p, fmt, STACKPULSE_EXPORT_LINES, &la);
		char *b = syn_export(p, fmt, STACKPULSE_EXPORT_LINES, &lb);
		CHECK(la == lb && memcmp(a, b, la) == 0);
		sp_free(a);
		sp_free(b);
	}
	stackpulse_profile_free(p);
	stackpulse_spool_close(s);
	sp_buf_free(&mem);
}

static void put_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	REQUIRE(f);
	fputs(text, f);
	fclose(f);
}

/* A symlink or hard link planted at an export path is replaced by the new
 * file; the file it led to keeps its bytes. A failed export leaves the old
 * file as it was and no temporary file. */
SP_TEST(export_never_writes_through_links)
{
	sp_buf mem;
	stackpulse_spool *s;
	stackpulse_profile *p = export_fixture(&mem, &s);
	char tmp[512];
	snprintf(tmp, sizeof(tmp), "%s/links",
	         sp_test_tmpdir()); /* Its own: others leave dotfiles. */
	REQUIRE(mkdir(tmp, 0700) == 0);
	char victim[600], path[600], hard[600];
	snprintf(victim, sizeof(victim), "%s/victim.txt", tmp);
	snprintf(path, sizeof(path), "%s/planted.folded", tmp);
	snprintf(hard, sizeof(hard), "%s/hard.folded", tmp);
	put_file(victim, "precious\n");
	REQUIRE(symlink(victim, path) == 0);
	REQUIRE_OK(stackpulse_export_to_path(p, STACKPULSE_EXPORT_FOLDED, NULL, path));
	struct stat st;
	REQUIRE(lstat(path, &st) == 0);
	CHECK(S_ISREG(st.st_mode));
	CHECK(st.st_size > 9);
	size_t len = 0;
	char *text = sp_test_read_file(victim, &len);
	REQUIRE(text);
	CHECK_STR(text, "precious\n");
	free(text);

	REQUIRE(link(victim, hard) == 0);
	REQUIRE_OK(stackpulse_export_to_path(p, STACKPULSE_EXPORT_SVG, NULL, hard));
	text = sp_test_read_file(victim, &len);
	REQUIRE(text);
	CHECK_STR(text, "precious\n");
	free(text);
	REQUIRE(stat(victim, &st) == 0);
	CHECK_EQ(st.st_nlink, 1u);

	/* Unknown flags fail the export after the path was checked. */
	stackpulse_export_opts bad = STACKPULSE_EXPORT_OPTS;
	bad.flags = 0x100;
	CHECK_EQ(stackpulse_export_to_path(p, STACKPULSE_EXPORT_FOLDED, &bad, victim), -EINVAL);
	text = sp_test_read_file(victim, &len);
	REQUIRE(text);
	CHECK_STR(text, "precious\n");
	free(text);
	char leftovers[1024];
	snprintf(leftovers, sizeof(leftovers), "ls -A '%s' | grep -c '^\\.' || true", tmp);
	FILE *ls = popen(leftovers, "r");
	REQUIRE(ls);
	int n = -1;
	CHECK_EQ(fscanf(ls, "%d", &n), 1);
	pclose(ls);
	CHECK_EQ(n, 0); /* No temporary file left. */
	stackpulse_profile_free(p);
	stackpulse_spool_close(s);
	sp_buf_free(&mem);
}
