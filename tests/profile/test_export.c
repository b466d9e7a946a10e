/* Exporters checked by real consumers: `go tool pprof` reads our pprof,
 * python3's json and XML parsers check the Firefox profile and the SVG,
 * and headless Chromium renders the SVG: the fixture's, and a recorded
 * Python program with one start-up tower 280 frames deep, whose
 * screenshot must show the hot frames. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../examples/report_top.h"
#include "common/alloc.h"
#include "example_tools.h"
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

/* Python: png_pixels(path) decodes an 8-bit RGB(A) PNG (zlib and the five
 * filters), returning its width, height and rows of RGB bytes (3 per
 * pixel). */
#define PNG_DECODE_PY                                                                              \
	"import sys, zlib, struct\n"                                                               \
	"def png_pixels(path):\n"                                                                  \
	"    b = open(path, 'rb').read()\n"                                                        \
	"    assert b[:8] == b'\\x89PNG\\r\\n\\x1a\\n'\n"                                          \
	"    pos, idat = 8, b''\n"                                                                 \
	"    while pos < len(b):\n"                                                                \
	"        n, = struct.unpack('>I', b[pos:pos+4]); t = b[pos+4:pos+8]; d = "                 \
	"b[pos+8:pos+8+n]\n"                                                                       \
	"        if t == b'IHDR': w, h, depth, ctype = struct.unpack('>IIBB', d[:10])\n"           \
	"        if t == b'IDAT': idat += d\n"                                                     \
	"        pos += 12 + n\n"                                                                  \
	"    assert depth == 8 and ctype in (2, 6), (depth, ctype)\n"                              \
	"    bpp = 3 if ctype == 2 else 4\n"                                                       \
	"    raw = zlib.decompress(idat); stride = w * bpp; prev = bytearray(stride); out = []\n"  \
	"    for y in range(h):\n"                                                                 \
	"        ft = raw[y*(stride+1)]; line = bytearray(raw[y*(stride+1)+1:(y+1)*(stride+1)])\n" \
	"        if ft == 2:\n"                                                                    \
	"            line = bytearray((x + u) & 255 for x, u in zip(line, prev))\n"                \
	"        elif ft != 0:\n"                                                                  \
	"            for i in range(stride):\n"                                                    \
	"                a = line[i-bpp] if i >= bpp else 0; c = prev[i-bpp] if i >= bpp else 0\n" \
	"                up = prev[i]\n"                                                           \
	"                if ft == 1: line[i] = (line[i] + a) & 255\n"                              \
	"                elif ft == 3: line[i] = (line[i] + (a + up) // 2) & 255\n"                \
	"                elif ft == 4:\n"                                                          \
	"                    p = a + up - c; pa, pb, pc = abs(p - a), abs(p - up), abs(p - c)\n"   \
	"                    line[i] = (line[i] + (a if pa <= pb and pa <= pc else up if pb <= "   \
	"pc "                                                                                      \
	"else c)) & 255\n"                                                                         \
	"        prev = line\n"                                                                    \
	"        out.append(bytes(line) if bpp == 3 else bytes(v for i, v in enumerate(line) if "  \
	"i % 4 != 3))\n"                                                                           \
	"    return w, h, out\n"

/* Prints the PNG's distinct colours and the share of pixels that differ
 * from the most common one. */
static const char png_check_py[] =
        PNG_DECODE_PY "w, h, out = png_pixels(sys.argv[1])\n"
                      "cnt = {}\n"
                      "for line in out:\n"
                      "    for i in range(0, w * 3, 6):\n"
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

/* The headless Chromium here, or a skip. */
static const char *chromium(void)
{
	const char *browser = sp_test_have_program("chromium")           ? "chromium"
	                      : sp_test_have_program("chromium-browser") ? "chromium-browser"
	                                                                 : NULL;
	if (!browser)
		sp_test_skip("chromium is not installed (apt-get install -y chromium)");
	return browser;
}

/* Runs headless Chromium with @p what (--screenshot=PNG --window-size=W,H,
 * or --dump-dom) on @p svg; its stdout goes to @p out, its log is appended
 * to @p log. Returns its exit status. */
static int chromium_run(const char *what, const char *svg, const char *out, const char *log)
{
	const char *tmp = sp_test_tmpdir();
	char cmd[4096];
	snprintf(cmd, sizeof(cmd),
	         "cd %s && HOME=%s timeout 90 %s --headless --no-sandbox --disable-gpu "
	         "--no-first-run --user-data-dir=%s/chromium-profile --enable-logging=stderr %s "
	         "file://%s >%s 2>>%s",
	         tmp, tmp, chromium(), tmp, what, svg, out, log);
	return sp_test_run(cmd);
}

/* Screenshots @p svg at @p w x @p h into @p png; skips when Chromium
 * cannot render here. */
static void screenshot(const char *svg, const char *png, int w, int h, const char *log)
{
	char what[1024];
	snprintf(what, sizeof(what), "--screenshot=%s --window-size=%d,%d", png, w, h);
	int rc = chromium_run(what, svg, "/dev/null", log);
	struct stat sb;
	if (rc != 0 || stat(png, &sb) != 0) {
		char *l = sp_test_read_file(log, NULL);
		fprintf(stderr, "    chromium exit %d: %.2000s\n", rc, l ? l : "");
		free(l);
		sp_test_skip("headless chromium could not render here");
	}
}

/* Writes @p svg with @p script before its end into @p to. */
static void with_script(const char *svg, const char *script, const char *to)
{
	char *text = sp_test_read_file(svg, NULL);
	REQUIRE(text != NULL);
	char *tail = strstr(text, "</svg>");
	REQUIRE(tail != NULL);
	*tail = '\0';
	FILE *f = fopen(to, "w");
	REQUIRE(f != NULL);
	fputs(text, f);
	fputs(script, f);
	REQUIRE_EQ(fclose(f), 0);
	free(text);
}

/* Runs the Python @p script with @p args: its exit status, its output in
 * *out (malloc'd). */
static int run_py(const char *name, const char *script, const char *args, char **out)
{
	char py[512], o[512], cmd[4096];
	snprintf(py, sizeof(py), "%s/%s", sp_test_tmpdir(), name);
	snprintf(o, sizeof(o), "%s/%s.out", sp_test_tmpdir(), name);
	FILE *f = fopen(py, "w");
	REQUIRE(f != NULL);
	fputs(script, f);
	REQUIRE_EQ(fclose(f), 0);
	snprintf(cmd, sizeof(cmd), "python3 %s %s >%s 2>&1", py, args, o);
	int rc = sp_test_run(cmd);
	*out = sp_test_read_file(o, NULL);
	REQUIRE(*out != NULL);
	if (rc != 0)
		fprintf(stderr, "    %s: %s\n", name, *out);
	return rc;
}

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
	char png[512], log[512];
	snprintf(png, sizeof(png), "%s/flame.png", tmp);
	snprintf(log, sizeof(log), "%s/chromium.log", tmp);
	remove(log);
	screenshot(path, png, 1200, 800, log);
	char *l = sp_test_read_file(log, NULL);
	if (l && strstr(l, "Uncaught"))
		fprintf(stderr, "    script error in the SVG: %.2000s\n", l);
	CHECK(l && !strstr(l, "Uncaught")); /* The inline script loads without errors. */
	free(l);
	/* Click a frame in the real browser: it must fill the width, its
	 * siblings hide, and its children scale with it. */
	char zoom_svg[512];
	snprintf(zoom_svg, sizeof(zoom_svg), "%s/zoom.svg", tmp);
	with_script(path, zoom_script, zoom_svg);
	CHECK_EQ(chromium_run("--dump-dom", zoom_svg, out, log), 0);
	text = sp_test_read_file(out, NULL);
	REQUIRE(text != NULL);
	CHECK(strstr(text, "RESULT ") != NULL);
	CHECK(strstr(text, "|ladder+0x1400=10.00,1180.00|") != NULL);
	CHECK(strstr(text, "|ladder+0x1200=hidden|") != NULL);
	CHECK(strstr(text, "|do_syscall_64_[k]=796.67,393.33|") != NULL);
	CHECK(strstr(text, "|all=10,1180|") != NULL);
	free(text);

	rc = run_py("check_png.py", png_check_py, png, &text);
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

/* A Python program whose start-up has a few samples far deeper than its
 * hot part, as the demo's imports have: a recursion 280 deep spins 20 ms
 * of CPU (1.3% at most: too thin for a label), then hot_loop < inner <
 * <genexpr> runs 1.5 s of CPU. CPU time, not wall time: the shares hold
 * under load. */
static const char deep_py[] = "import sys\n"
                              "import time\n"
                              "\n"
                              "sys.setrecursionlimit(10000)\n"
                              "\n"
                              "\n"
                              "def spin(seconds):\n"
                              "    end = time.process_time() + seconds\n"
                              "    while time.process_time() < end:\n"
                              "        pass\n"
                              "\n"
                              "\n"
                              "def descend(n):\n"
                              "    if n == 0:\n"
                              "        spin(0.02)\n"
                              "    else:\n"
                              "        descend(n - 1)\n"
                              "\n"
                              "\n"
                              "def inner():\n"
                              "    return sum(i * i for i in range(200))\n"
                              "\n"
                              "\n"
                              "def hot_loop(seconds):\n"
                              "    end = time.process_time() + seconds\n"
                              "    while time.process_time() < end:\n"
                              "        inner()\n"
                              "\n"
                              "\n"
                              "descend(280)\n"
                              "hot_loop(1.5)\n";

/* The screenshot (argv[1], decoded) against the SVG (argv[2]): its size,
 * the share of the flame graph in view that is not its background, the
 * deepest folded tower, and for each frame named in argv[3:] (the widest of that name)
 * where the SVG puts it and whether the screenshot has its colour there
 * (three points of its top pixel row, above the label). */
static const char view_check_py[] = PNG_DECODE_PY
        "import xml.etree.ElementTree as E\n"
        "w, h, rows = png_pixels(sys.argv[1])\n"
        "ns = '{http://www.w3.org/2000/svg}'\n"
        "root = E.parse(sys.argv[2]).getroot()\n"
        "sw, sh = int(root.get('width')), int(root.get('height'))\n"
        "print('svg', sw, sh, 'png', w, h)\n"
        "vw, vh = min(w, sw), min(h, sh)\n"
        "bg = bytes((244, 244, 238))\n"
        "n = sum(1 for line in rows[:vh] for i in range(0, vw * 3, 6) if line[i:i+3] != bg)\n"
        "print('filled', round(100.0 * n / (((vw + 1) // 2) * vh), 2))\n"
        "fr = [g for g in root.iter(ns + 'g') if 'f' in (g.get('class') or '').split()]\n"
        "more = [int(g.get('data-h')) for g in fr if 'more' in g.get('class').split()\n"
        "        and not g.get('style')]\n"
        "print('folded', max(more) if more else 0)\n"
        "for name in sys.argv[3:]:\n"
        "    best = None\n"
        "    for g in fr:\n"
        "        if g.get('style') or not g.find(ns + 'title').text.startswith(name + ' ('):\n"
        "            continue\n"
        "        r = g.find(ns + 'rect')\n"
        "        x, y, rw = (float(r.get(k)) for k in ('x', 'y', 'width'))\n"
        "        if best is None or rw > best[2]:\n"
        "            best = (x, y, rw, r.get('fill'))\n"
        "    if best is None:\n"
        "        print('frame', name, 'missing')\n"
        "        continue\n"
        "    x, y, rw, fill = best\n"
        "    want = [int(v) for v in fill[4:-1].split(',')]\n"
        "    drawn = True\n"
        "    for px in (int(x + rw / 4), int(x + rw / 2), int(x + 3 * rw / 4)):\n"
        "        py = int(y)\n"
        "        got = list(rows[py][px * 3:px * 3 + 3]) if py < h and px < w else None\n"
        "        drawn = drawn and got is not None and all(abs(a - b) <= 3 for a, b in zip(got, "
        "want))\n"
        "    print('frame', name, 'y', int(y), 'width', int(rw), 'drawn' if drawn else "
        "'not-drawn')\n";

/* Appended to the SVG: clicks the expander of the deepest folded tower
 * until none is left (each zoomed frame must fill the width), names the
 * deepest frame then shown, resets, and searches for spin (hidden in the
 * tower: its expander is painted). */
static const char expand_script[] =
        "<script type=\"text/ecmascript\"><![CDATA[\n"
        "window.addEventListener('load', function () {\n"
        "  var fr = document.getElementsByClassName('f'), out = [], clicks = 0;\n"
        "  function shown(g) { return g.style.display !== 'none'; }\n"
        "  function deepestMore() {\n"
        "    var best = null;\n"
        "    for (var i = 0; i < fr.length; i++)\n"
        "      if (fr[i].classList.contains('more') && shown(fr[i]) &&\n"
        "          (!best || +fr[i].getAttribute('data-h') > +best.getAttribute('data-h')))\n"
        "        best = fr[i];\n"
        "    return best;\n"
        "  }\n"
        "  for (var m = deepestMore(); m && clicks < 20; m = deepestMore()) {\n"
        "    m.dispatchEvent(new MouseEvent('click'));\n"
        "    clicks++;\n"
        "    var r = m.getElementsByTagName('rect')[0];\n"
        "    out.push('zoom ' + r.getAttribute('x') + ',' + r.getAttribute('width') + ' ' +\n"
        "             (+r.getAttribute('y') >= 0 ? 'in' : 'out'));\n"
        "  }\n"
        "  var deep = null;\n"
        "  for (var i = 0; i < fr.length; i++)\n"
        "    if (shown(fr[i]) && (!deep || +fr[i].getAttribute('data-d') > "
        "+deep.getAttribute('data-d')))\n"
        "      deep = fr[i];\n"
        "  var spin = -1;\n"
        "  for (var i = 0; i < fr.length; i++)\n"
        "    if (shown(fr[i]) && fr[i].getElementsByTagName('title')[0].textContent.indexOf("
        "'spin (') === 0)\n"
        "      spin = Math.max(spin, +fr[i].getAttribute('data-d'));\n"
        "  out.push('deepest ' + deep.getAttribute('data-d'));\n"
        "  out.push('spin ' + spin);\n"
        "  document.getElementById('reset').dispatchEvent(new MouseEvent('click'));\n"
        "  window.prompt = function () { return '^spin '; };\n"
        "  document.getElementById('search').dispatchEvent(new MouseEvent('click'));\n"
        "  out.push('search ' + deepestMore().getElementsByTagName('rect')[0].getAttribute('fill') "
        "+\n"
        "           ' ' + document.getElementById('matched').textContent);\n"
        "  document.getElementById('details').textContent = 'RESULT |' + out.join('|') + '|';\n"
        "});\n"
        "]]></script>\n</svg>\n";

/* The demo's case, recorded: one start-up tower 280 frames deep must not
 * push the hot frames out of a 1400x900 window. From the screenshot: the
 * SVG fits, hot_loop and inner are drawn where the SVG says, wide, inside
 * the view, and most of the view is frames, not background; the tower is
 * folded into an expander that zooms in to its deepest frame. */
SP_TEST(svg_deep_startup_sample_keeps_hot_frames_in_view)
{
	char record[512], report[512], cmd[4096], spool[512], svg[512], png[512], log[512];
	tools(record, report, sizeof(record));
	const char *py = "/usr/bin/python3.11";
	if (access(py, X_OK) != 0)
		sp_test_skip("/usr/bin/python3.11 is not installed (Debian python3.11)");
	const char *tmp = sp_test_tmpdir();
	char script[512];
	snprintf(script, sizeof(script), "%s/deep.py", tmp);
	FILE *f = fopen(script, "w");
	REQUIRE(f != NULL);
	fputs(deep_py, f);
	REQUIRE_EQ(fclose(f), 0);
	snprintf(spool, sizeof(spool), "%s/deep.spool", tmp);
	snprintf(svg, sizeof(svg), "%s/deep.svg", tmp);
	snprintf(png, sizeof(png), "%s/deep.png", tmp);
	snprintf(log, sizeof(log), "%s/deep-chromium.log", tmp);
	/* The tower is a few samples (20 ms of CPU at 499 Hz): recorded again
	 * in the rare run that has none of them. Its depth: the most names on
	 * a folded line (the root label and the frames). */
	int deepest = 0;
	char folded_path[600];
	snprintf(folded_path, sizeof(folded_path), "%s/deep.folded", tmp);
	for (int attempt = 0; attempt < 3 && deepest < 250; attempt++) {
		snprintf(cmd, sizeof(cmd), "%s %s", py, script);
		record_cmd(record, spool, cmd);
		snprintf(cmd, sizeof(cmd), "%s %s --folded >%s 2>/dev/null", report, spool,
		         folded_path);
		REQUIRE_EQ(sp_test_run(cmd), 0);
		char *text = sp_test_read_file(folded_path, NULL);
		REQUIRE(text != NULL);
		for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
			int names = 1;
			for (const char *c = line; *c; c++)
				names += *c == ';';
			if (names > deepest)
				deepest = names;
		}
		free(text);
		printf("    recording %d: %d frames deep\n", attempt + 1, deepest);
	}
	REQUIRE(deepest >= 250);
	snprintf(cmd, sizeof(cmd), "%s %s --svg %s >/dev/null 2>&1", report, spool, svg);
	REQUIRE_EQ(sp_test_run(cmd), 0);
	screenshot(svg, png, 1400, 900, log);

	char *text = NULL, args[2048];
	snprintf(args, sizeof(args), "%s %s hot_loop inner", png, svg);
	int rc = run_py("check_view.py", view_check_py, args, &text);
	printf("%s", text);
	REQUIRE_EQ(rc, 0);
	unsigned svg_h = 0;
	double filled = 0;
	int folded = 0, y = 0, width = 0;
	const char *at = strstr(text, "svg 1200 ");
	CHECK(at && sscanf(at, "svg 1200 %u", &svg_h) == 1 && svg_h <= 900);
	at = strstr(text, "\nfilled ");
	/* Mostly frames, not background. */
	CHECK(at && sscanf(at, "\nfilled %lf", &filled) == 1 && filled >= 50);
	/* The deep tower is folded at the top. */
	at = strstr(text, "\nfolded ");
	CHECK(at && sscanf(at, "\nfolded %d", &folded) == 1 && folded == deepest);
	static const char *const hot[] = { "hot_loop", "inner" };
	for (int k = 0; k < 2; k++) {
		char key[64], drawn[16] = "";
		snprintf(key, sizeof(key), "\nframe %s y ", hot[k]);
		at = strstr(text, key);
		CHECK(at && sscanf(at + strlen(key), "%d width %d %15s", &y, &width, drawn) == 3);
		CHECK(y >= 0 && y + 16 <= 900);
		CHECK(width >= 1180 / 2);  /* The hot part: most of the width. */
		CHECK_STR(drawn, "drawn"); /* Its colour is in the screenshot there. */
	}
	free(text);

	/* The expander in the browser: each click zooms into the tower, down to
	 * its deepest frame (spin); a search for spin paints the expander. */
	char zoom[512], out[512];
	snprintf(zoom, sizeof(zoom), "%s/deep-zoom.svg", tmp);
	snprintf(out, sizeof(out), "%s/deep-zoom.dom", tmp);
	with_script(svg, expand_script, zoom);
	CHECK_EQ(chromium_run("--dump-dom", zoom, out, log), 0);
	text = sp_test_read_file(out, NULL);
	REQUIRE(text != NULL);
	const char *res = strstr(text, ">RESULT |"); /* Not the script's own text. */
	printf("    %.600s\n", res ? res : "(no result)");
	CHECK(res != NULL);
	if (res) {
		CHECK(strstr(res, "|zoom 10.00,1180.00 in|") != NULL);
		CHECK(strstr(res, "|zoom 10.00,1180.00 out|") == NULL);
		char want[64];
		snprintf(want, sizeof(want), "|deepest %d|", deepest);
		CHECK(strstr(res, want) != NULL);
		const char *sp = strstr(res, "|spin ");
		CHECK(sp && atoi(sp + 6) > deepest - 10); /* spin under descend x280. */
		CHECK(strstr(res, "|search rgb(230,0,230) Matched: ") != NULL);
	}
	free(text);
	char *l = sp_test_read_file(log, NULL);
	CHECK(l && !strstr(l, "Uncaught"));
	free(l);
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
