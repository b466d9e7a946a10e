/* Interactive SVG flame graph, self-contained (inline CSS and script).
 *
 * Built from the folded lines, so it shows exactly what the folded export
 * says: lines sorted frame by frame make every subtree contiguous, and one
 * pass with a stack of open frames yields each rectangle. Root at the
 * bottom; hover shows the title, click zooms, "Search" highlights a regular
 * expression, "Reset Zoom" returns. Colours depend only on the frame kind
 * and name, so the same profile always renders the same. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/error.h"
#include "profile/export_internal.h"

#define SVG_W      1200
#define SVG_PAD    10
#define SVG_FH     16
#define SVG_TOP    48
#define SVG_BOTTOM 30
#define SVG_CHAR_W 7.0
#define SVG_MIN_W  0.1

typedef struct open_frame {
	uint32_t id; /* Label rank at depth 0, else canonical node. */
	uint32_t thread;
	uint64_t start; /* In samples. */
} open_frame;

typedef struct svg_ctx {
	sp_out *out;
	uint64_t total;
	int timed;    /* Counts are microseconds (a time profile). */
	double scale; /* Pixels per sample. */
	uint32_t levels;
	uint32_t height;
} svg_ctx;

static uint32_t name_hash(const sp_name *nm)
{
	uint32_t h = 2166136261u;
	size_t n = sp_name_len(nm);
	for (size_t i = 0; i < n; i++) {
		h ^= sp_name_at(nm, i);
		h *= 16777619u;
	}
	return h;
}

static void colour(int kind_byte, const sp_name *nm, int rgb[3])
{
	uint32_t h = name_hash(nm);
	double v1 = (double)(h & 0xff) / 255.0, v2 = (double)((h >> 8) & 0xff) / 255.0,
	       v3 = (double)((h >> 16) & 0xff) / 255.0;
	double r, g, b;
	switch (kind_byte) {
	case 1 + STACKPULSE_FRAME_NATIVE:
		r = 205 + 50 * v3, g = 230 * v1, b = 55 * v2; /* Warm, like flamegraph.pl. */
		break;
	case 1 + STACKPULSE_FRAME_INLINE:
		r = 50 + 60 * v1, g = 165 + 55 * v1, b = 165 + 55 * v2;
		break;
	case 1 + STACKPULSE_FRAME_KERNEL: r = 200 + 55 * v1, g = 110 + 60 * v2, b = 20 * v3; break;
	case 1 + STACKPULSE_FRAME_PYTHON:
		r = 60 + 50 * v1, g = 150 + 60 * v2, b = 200 + 55 * v3;
		break;
	case 1 + STACKPULSE_FRAME_JIT:
		r = 120 + 50 * v1, g = 200 + 55 * v2, b = 50 + 40 * v3;
		break;
	case SP_KIND_ROOT: r = 170 + 40 * v1, g = 150 + 30 * v1, b = 220 + 30 * v2; break;
	default: r = g = b = 170 + 40 * v1; break;
	}
	rgb[0] = (int)r;
	rgb[1] = (int)g;
	rgb[2] = (int)b;
}

/* XML text of the cleaned name's first @p max bytes. */
static int name_xml(sp_out *o, const sp_name *nm, size_t max)
{
	char tmp[256];
	size_t done = 0;
	for (int k = 0; k < nm->k && done < max; k++) {
		size_t n = nm->n[k] < max - done ? nm->n[k] : max - done;
		for (size_t off = 0; off < n;) {
			size_t m = n - off < sizeof(tmp) ? n - off : sizeof(tmp);
			/* Cut between UTF-8 sequences so each chunk stays valid. */
			if (off + m < n)
				while (m > 1 && ((unsigned char)nm->s[k][off + m] & 0xc0) == 0x80)
					m--;
			for (size_t i = 0; i < m; i++)
				tmp[i] = (char)sp_name_clean((unsigned char)nm->s[k][off + i]);
			sp_out_xml(o, tmp, m);
			off += m;
		}
		done += n;
	}
	return o->err;
}

/* Emits one frame rectangle. */
static int emit_frame(svg_ctx *c, int kb, const sp_name *nm, uint32_t depth, uint64_t start,
                      uint64_t count)
{
	double w = (double)count * c->scale;
	if (w < SVG_MIN_W)
		return c->out->err;
	size_t tlen = sp_name_len(nm);
	double x = SVG_PAD + (double)start * c->scale;
	double y = (double)c->height - SVG_BOTTOM - (double)(depth + 1) * SVG_FH;
	int rgb[3];
	colour(kb, nm, rgb);
	sp_out *o = c->out;
	sp_out_printf(o,
	              "<g class=\"f\" data-s=\"%" PRIu64 "\" data-n=\"%" PRIu64
	              "\" data-d=\"%u\"><title>",
	              start, count, depth);
	name_xml(o, nm, tlen);
	double share = c->total ? 100.0 * (double)count / (double)c->total : 0.0;
	if (c->timed)
		sp_out_printf(o, " (%.3f ms, %.2f%%)</title>", (double)count / 1e3, share);
	else
		sp_out_printf(o, " (%" PRIu64 " sample%s, %.2f%%)</title>", count,
		              count == 1 ? "" : "s", share);
	sp_out_printf(o,
	              "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" "
	              "fill=\"rgb(%d,%d,%d)\" rx=\"2\"/>",
	              x, y, w, SVG_FH - 1, rgb[0], rgb[1], rgb[2]);
	sp_out_printf(o, "<text x=\"%.2f\" y=\"%.1f\">", x + 3, y + SVG_FH - 4.5);
	/* Only what fits; the script refits after a zoom. */
	double fit = (w - 6) / SVG_CHAR_W;
	if (fit >= 3) {
		size_t maxc = (size_t)fit;
		if (tlen <= maxc) {
			name_xml(o, nm, tlen);
		} else {
			size_t cut = maxc - 2;
			while (cut > 0 && (sp_name_at(nm, cut) & 0xc0) == 0x80)
				cut--; /* Do not split a UTF-8 sequence. */
			name_xml(o, nm, cut);
			sp_out_str(o, "..");
		}
	}
	return sp_out_str(o, "</text></g>\n");
}

static const char svg_script[] =
        "<script type=\"text/ecmascript\"><![CDATA[\n"
        "'use strict';\n"
        "var W=SP_W,PAD=SP_PAD,CW=SP_CW,frames,details,matched,orig={},zoomFrame=null,term=null;\n"
        "function num(g,k){return +g.getAttribute('data-'+k);}\n"
        "function nameOf(g){var t=g.getElementsByTagName('title')[0].textContent;"
        "var i=t.lastIndexOf(' (');return i<0?t:t.substring(0,i);}\n"
        "function fit(g){var "
        "r=g.getElementsByTagName('rect')[0],t=g.getElementsByTagName('text')[0];"
        "var w=+r.getAttribute('width'),n=nameOf(g),m=Math.floor((w-6)/CW);"
        "t.setAttribute('x',(+r.getAttribute('x')+3).toFixed(2));"
        "t.textContent=m<3?'':(n.length<=m?n:n.substring(0,m-2)+'..');}\n"
        "function init(){frames=document.getElementsByClassName('f');"
        "details=document.getElementById('details');matched=document.getElementById('matched');"
        "for(var i=0;i<frames.length;i++){var g=frames[i];"
        "g.onmouseover=function(){details.textContent=this.getElementsByTagName('title')[0]."
        "textContent;};"
        "g.onmouseout=function(){details.textContent=' ';};"
        "g.onclick=function(){zoom(this);};}"
        "document.getElementById('reset').onclick=function(){unzoom();};"
        "document.getElementById('search').onclick=function(){search();};"
        "document.getElementById('clear').onclick=function(){clearSearch();};"
        "window.addEventListener('keydown',function(e){if((e.ctrlKey||e.metaKey)&&e.keyCode===70)"
        "{e.preventDefault();search();}else if(e.keyCode===27){unzoom();clearSearch();}});}\n"
        "function zoom(z){var s=num(z,'s'),n=num(z,'n'),d=num(z,'d'),sc=(W-2*PAD)/n;zoomFrame=z;"
        "for(var i=0;i<frames.length;i++){var g=frames[i],r=g.getElementsByTagName('rect')[0];"
        "var fs=num(g,'s'),fn=num(g,'n'),fd=num(g,'d');g.classList.remove('anc');"
        "if(fd<d&&fs<=s&&fs+fn>=s+n){r.setAttribute('x',PAD);r.setAttribute('width',W-2*PAD);"
        "g.classList.add('anc');g.style.display='';}"
        "else if(fd>=d&&fs>=s&&fs+fn<=s+n){var w=fn*sc;if(w<0.1){g.style.display='none';continue;}"
        "r.setAttribute('x',(PAD+(fs-s)*sc).toFixed(2));r.setAttribute('width',w.toFixed(2));g."
        "style.display='';}"
        "else{g.style.display='none';continue;}fit(g);}"
        "document.getElementById('reset').style.opacity=d>0?1:0.4;}\n"
        "function unzoom(){var "
        "all=document.querySelector('.f[data-d=\"0\"]');if(all)zoom(all);zoomFrame=null;}\n"
        "function search(){var t=window.prompt('Search for (regular expression):',term||'');"
        "if(t===null)return;if(t===''){clearSearch();return;}var re;"
        "try{re=new RegExp(t);}catch(e){window.alert('Bad expression: '+e.message);return;}"
        "term=t;var iv=[],total=0;for(var i=0;i<frames.length;i++){var "
        "g=frames[i],r=g.getElementsByTagName('rect')[0];"
        "if(num(g,'d')===0)total=num(g,'n');if(!(i in orig))orig[i]=r.getAttribute('fill');"
        "if(re.test(nameOf(g))){r.setAttribute('fill','rgb(230,0,230)');iv.push([num(g,'s'),num(g,'"
        "s')+num(g,'n')]);}"
        "else r.setAttribute('fill',orig[i]);}"
        "iv.sort(function(a,b){return a[0]-b[0];});var sum=0,end=-1;"
        "for(var k=0;k<iv.length;k++){var "
        "a=Math.max(iv[k][0],end);if(iv[k][1]>a){sum+=iv[k][1]-a;end=iv[k][1];}}"
        "matched.textContent='Matched: '+(total?(100*sum/total).toFixed(2):'0')+'%';"
        "document.getElementById('clear').style.display='';}\n"
        "function clearSearch(){for(var i in "
        "orig)frames[i].getElementsByTagName('rect')[0].setAttribute('fill',orig[i]);"
        "term=null;matched.textContent=' "
        "';document.getElementById('clear').style.display='none';}\n"
        "]]></script>\n";

/* Writes the script with its constants filled in. */
static int emit_script(sp_out *o)
{
	const char *s = svg_script;
	const char *keys[] = { "SP_W", "SP_PAD", "SP_CW" };
	char vals[3][16];
	snprintf(vals[0], sizeof(vals[0]), "%d", SVG_W);
	snprintf(vals[1], sizeof(vals[1]), "%d", SVG_PAD);
	snprintf(vals[2], sizeof(vals[2]), "%.1f", SVG_CHAR_W);
	while (*s) {
		int hit = -1;
		for (int k = 0; k < 3; k++)
			if (strncmp(s, keys[k], strlen(keys[k])) == 0 &&
			    (hit < 0 || strlen(keys[k]) > strlen(keys[hit])))
				hit = k;
		if (hit >= 0) {
			sp_out_str(o, vals[hit]);
			s += strlen(keys[hit]);
		} else {
			const char *next = strstr(s + 1, "SP_");
			size_t n = next ? (size_t)(next - s) : strlen(s);
			sp_out_write(o, s, n);
			s += n;
		}
	}
	return o->err;
}

static int emit_header(svg_ctx *c, const char *title)
{
	sp_out *o = c->out;
	sp_out_str(o, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n");
	sp_out_printf(o,
	              "<svg version=\"1.1\" width=\"%d\" height=\"%u\" viewBox=\"0 0 %d %u\" "
	              "xmlns=\"http://www.w3.org/2000/svg\" onload=\"init(evt)\">\n",
	              SVG_W, c->height, SVG_W, c->height);
	sp_out_str(
	        o,
	        "<style type=\"text/css\">\n"
	        "text{font-family:Verdana,sans-serif;font-size:12px;fill:#000;}\n"
	        ".f{cursor:pointer;}\n.f:hover rect{stroke:#000;stroke-width:0.5;}\n"
	        ".f text{pointer-events:none;}\n.anc{opacity:0.6;}\n"
	        "#title{font-size:17px;}\n.btn{cursor:pointer;fill:#003;}\n.btn:hover{fill:#06c;}\n"
	        "</style>\n");
	emit_script(o);
	sp_out_printf(o, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%u\" fill=\"#f4f4ee\"/>\n",
	              SVG_W, c->height);
	sp_out_printf(o, "<text id=\"title\" x=\"%d\" y=\"24\" text-anchor=\"middle\">", SVG_W / 2);
	sp_out_xml(o, title, strlen(title));
	sp_out_str(o, "</text>\n");
	sp_out_printf(o,
	              "<text id=\"reset\" class=\"btn\" x=\"%d\" y=\"24\" "
	              "style=\"opacity:0.4\">Reset Zoom</text>\n",
	              SVG_PAD);
	sp_out_printf(o,
	              "<text id=\"search\" class=\"btn\" x=\"%d\" y=\"24\" "
	              "text-anchor=\"end\">Search</text>\n",
	              SVG_W - SVG_PAD);
	sp_out_printf(o,
	              "<text id=\"clear\" class=\"btn\" x=\"%d\" y=\"24\" text-anchor=\"end\" "
	              "style=\"display:none\">Clear</text>\n",
	              SVG_W - SVG_PAD - 60);
	sp_out_printf(o, "<text id=\"details\" x=\"%d\" y=\"%u\"> </text>\n", SVG_PAD,
	              c->height - 10);
	sp_out_printf(o, "<text id=\"matched\" x=\"%d\" y=\"%u\" text-anchor=\"end\"> </text>\n",
	              SVG_W - SVG_PAD, c->height - 10);
	return o->err;
}

/* Emits open frame @p d (depth d + 1; frame 0 is the root label). */
static int close_frame(svg_ctx *c, const struct stackpulse_profile *p, const sp_folded *f,
                       uint32_t flags, const open_frame *of, uint32_t d, uint64_t x)
{
	sp_name nm;
	int kb;
	if (d == 0) {
		sp_name_label(p, of->thread, flags, &nm);
		kb = SP_KIND_ROOT;
	} else {
		sp_name_frame(p, f->cframe[of->id], flags, &nm);
		kb = (unsigned char)sp_folded_kind(p, f, of->id);
	}
	return emit_frame(c, kb, &nm, d + 1, of->start, x - of->start);
}

int sp_export_svg(const struct stackpulse_profile *p, const stackpulse_export_opts *opts,
                  sp_out *out)
{
	sp_folded f;
	int rc = sp_folded_build(p, opts->flags, &f);
	if (rc)
		return rc;
	svg_ctx c;
	c.out = out;
	c.total = f.total;
	c.timed = p->time != STACKPULSE_TIME_SAMPLES;
	c.levels = f.max_depth + 1; /* Plus the "all" frame. */
	if (c.levels > 4096)
		c.levels = 4096; /* Deeper frames are still drawn, above the top. */
	c.height = SVG_TOP + SVG_BOTTOM + c.levels * SVG_FH;
	c.scale = f.total ? (double)(SVG_W - 2 * SVG_PAD) / (double)f.total : 0;
	open_frame *st = sp_calloc(f.max_depth + 1, sizeof(*st));
	uint32_t *path = sp_calloc(f.max_depth + 1, sizeof(uint32_t));
	if (!st || !path) {
		sp_free(st);
		sp_free(path);
		sp_folded_free(&f);
		return sp_error(-ENOMEM, "svg frame stack");
	}
	rc = emit_header(&c, opts->title ? opts->title : "Flame Graph");
	uint32_t nopen = 0;
	uint64_t x = 0;
	for (size_t i = 0; i < f.n && !rc; i++) {
		const sp_folded_line *l = &f.lines[i];
		uint32_t depth = sp_folded_path(&f, i, path);
		/* Frames shared with the open ones stay open. */
		uint32_t d = 0;
		if (nopen > 0 && st[0].id == l->label) {
			d = 1;
			while (d < nopen && d <= depth && st[d].id == path[d - 1])
				d++;
		}
		while (nopen > d && !rc) {
			nopen--;
			rc = close_frame(&c, p, &f, opts->flags, &st[nopen], nopen, x);
		}
		if (nopen == 0)
			st[nopen++] = (open_frame){ l->label, l->thread, x };
		for (; nopen <= depth; nopen++)
			st[nopen] = (open_frame){ path[nopen - 1], l->thread, x };
		x += l->count;
	}
	while (nopen > 0 && !rc) {
		nopen--;
		rc = close_frame(&c, p, &f, opts->flags, &st[nopen], nopen, x);
	}
	if (!rc) {
		sp_name all = { .s = { "all" }, .n = { 3 }, .k = 1 };
		rc = emit_frame(&c, SP_KIND_ROOT, &all, 0, 0, f.total);
	}
	if (!rc)
		rc = sp_out_str(out, "</svg>\n");
	sp_free(st);
	sp_free(path);
	sp_folded_free(&f);
	return rc;
}
