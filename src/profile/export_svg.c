/* Interactive SVG flame graph, self-contained (inline CSS and script).
 *
 * Built from the folded lines, so it shows exactly what the folded export
 * says: lines sorted frame by frame make every subtree contiguous, and one
 * pass with a stack of open frames yields each rectangle. Root at the
 * bottom; hover shows the title, click zooms, "Search" highlights a regular
 * expression, "Reset Zoom" returns. Colours depend only on the frame kind
 * and name, so the same profile always renders the same.
 *
 * The height is capped so that the root and the hot frames are in view
 * when the file opens: all levels when they fit SVG_FIT_ROWS rows (878
 * px), else those up to the deepest frame wide enough for a label (as far
 * as SVG_FIT_ROWS), or further only for frames holding a tenth of the
 * total. A frame in the top row whose callees go higher is an expander,
 * "+N name" with a dashed border: its callees are in the file but hidden,
 * and a click zooms into it, the picture growing to SVG_FIT_ROWS rows and
 * its callers cut to a few below it. So a deep thin tower (one start-up
 * sample 280 frames deep) costs one row, not the view. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/error.h"
#include "profile/export_internal.h"

#define SVG_W        1200
#define SVG_PAD      10
#define SVG_FH       16
#define SVG_TOP      48
#define SVG_BOTTOM   30
#define SVG_CHAR_W   7.0
#define SVG_MIN_W    0.1
#define SVG_FIT_ROWS 50                   /* 878 px: in a 1400x900 window with the root. */
#define SVG_MAX_ROWS 4096                 /* Even when hot frames reach higher. */
#define SVG_HOT_PCT  10                   /* A frame of this share of the total is never folded. */
#define SVG_LABEL_W  (6 + 3 * SVG_CHAR_W) /* Narrowest frame with a label. */
#define SVG_KEEP     3 /* Callers kept below a zoomed frame whose callees fill the rows. */

typedef struct open_frame {
	uint32_t id; /* Label rank at depth 0, else canonical node. */
	uint32_t thread;
	uint64_t start; /* In samples. */
	uint32_t maxd;  /* Depth of the deepest drawn frame of its subtree. */
} open_frame;

typedef struct svg_ctx {
	sp_out *out;
	const struct stackpulse_profile *p;
	const sp_folded *f;
	uint32_t flags;
	uint64_t total;
	int timed;    /* Counts are microseconds (a time profile). */
	double scale; /* Pixels per sample. */
	uint32_t rows;
	uint32_t height;
	uint32_t deepest;  /* Depth of the deepest drawn frame. */
	uint32_t hot;      /* Depth of the deepest hot frame (SVG_HOT_PCT). */
	uint32_t labelled; /* Depth of the deepest frame wide enough for a label. */
	int folded;        /* Some frame is an expander. */
	open_frame *st;
	uint32_t *path;
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

/* Emits one frame rectangle; @p maxd is the depth of its deepest drawn
 * callee (its own depth for a leaf). Above the top row it is hidden; in
 * the top row with callees it is an expander. */
static int emit_frame(svg_ctx *c, int kb, const sp_name *nm, uint32_t depth, uint32_t maxd,
                      uint64_t start, uint64_t count)
{
	double w = (double)count * c->scale;
	if (w < SVG_MIN_W)
		return c->out->err;
	size_t tlen = sp_name_len(nm);
	double x = SVG_PAD + (double)start * c->scale;
	double y = (double)c->height - SVG_BOTTOM - (double)(depth + 1) * SVG_FH;
	int hidden = depth >= c->rows, more = depth + 1 == c->rows && maxd > depth;
	int rgb[3];
	colour(kb, nm, rgb);
	sp_out *o = c->out;
	sp_out_printf(o,
	              "<g class=\"f%s\" data-s=\"%" PRIu64 "\" data-n=\"%" PRIu64
	              "\" data-d=\"%u\" data-h=\"%u\"%s><title>",
	              more ? " more" : "", start, count, depth, maxd,
	              hidden ? " style=\"display:none\"" : "");
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
	/* Only what fits, after an expander's "+N "; the script refits after
	 * a zoom. */
	double fit = (w - 6) / SVG_CHAR_W;
	char prefix[16] = "";
	if (more)
		snprintf(prefix, sizeof(prefix), "+%u ", maxd - depth);
	size_t plen = strlen(prefix);
	if (fit >= 3 && (double)plen + 3 <= fit) {
		size_t maxc = (size_t)fit - plen;
		sp_out_str(o, prefix);
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

/* The script, in parts (C17 promises string literals of 4095 bytes). */
static const char *const svg_script[] = {
	"<script type=\"text/ecmascript\"><![CDATA[\n"
	"'use strict';\n"
	"var W=SP_W,PAD=SP_PAD,CW=SP_CW,FH=SP_FH,H=SP_H,BOT=SP_BOT,ROWS=SP_ROWS,KEEP=SP_KEEP;\n"
	"var ROWS0=ROWS,FIT=Math.max(ROWS,SP_FIT),TOP=H-BOT-ROWS*FH;\n"
	"var frames,details,matched,orig={},zoomFrame=null,term=null,base=0;\n"
	"function num(g,k){return +g.getAttribute('data-'+k);}\n"
	"function nameOf(g){var t=g.getElementsByTagName('title')[0].textContent;var "
	"i=t.lastIndexOf(' (');return i<0?t:t.substring(0,i);}\n"
	"function isMore(g){return g.classList.contains('more');}\n"
	"function label(g){var d=num(g,'d');if(d===0&&base>0)return 'all (+'+base+' "
	"callers)';return (isMore(g)?'+'+(num(g,'h')-d)+' ':'')+nameOf(g);}\n"
	"function fit(g){var "
	"r=g.getElementsByTagName('rect')[0],t=g.getElementsByTagName('text')[0];var "
	"w=+r.getAttribute('width'),n=label(g),m=Math.floor((w-6)/"
	"CW);t.setAttribute('x',(+r.getAttribute('x')+3).toFixed(2));t.setAttribute('y',(+r."
	"getAttribute('y')+FH-4.5).toFixed(1));var p=isMore(g)?n.indexOf(' "
	"')+1:0;t.textContent=m<p+3?'':(n.length<=m?n:n.substring(0,m-2)+'..');}\n"
	"function "
	"init(){frames=document.getElementsByClassName('f');details=document.getElementById('"
	"details');matched=document.getElementById('matched');\n"
	"for(var i=0;i<frames.length;i++){var g=frames[i];\n"
	"g.onmouseover=function(){details.textContent=this.getElementsByTagName('title')[0]."
	"textContent+(isMore(this)?' +'+(num(this,'h')-num(this,'d'))+' frames above: click to "
	"expand':'');};\n"
	"g.onmouseout=function(){details.textContent=' ';};\n"
	"g.onclick=function(){zoom(this);};}\n"
	"document.getElementById('reset').onclick=function(){unzoom();};\n"
	"document.getElementById('search').onclick=function(){search();};\n"
	"document.getElementById('clear').onclick=function(){clearSearch();};\n"
	"window.addEventListener('keydown',function(e){if((e.ctrlKey||e.metaKey)&&e.keyCode===70){"
	"e.preventDefault();search();}else if(e.keyCode===27){unzoom();clearSearch();}});}\n"
	"function resize(rows){ROWS=rows;H=TOP+BOT+rows*FH;var "
	"e=document.documentElement;e.setAttribute('height',H);e.setAttribute('viewBox','0 0 '+W+' "
	"'+H);\n"
	"document.getElementById('bg').setAttribute('height',H);details.setAttribute('y',H-10);"
	"matched.setAttribute('y',H-10);}\n"
	"function zoom(z){var s=num(z,'s'),n=num(z,'n'),d=num(z,'d'),sc=(W-2*PAD)/n;zoomFrame=z;\n"
	"var "
	"rows=d===0?ROWS0:Math.max(ROWS0,Math.min(num(z,'h')+1,FIT));if(rows!==ROWS)resize(rows);\n"
	"base=Math.max(0,Math.min(d-KEEP-1,num(z,'h')-(ROWS-1)));\n"
	"for(var i=0;i<frames.length;i++){var g=frames[i],r=g.getElementsByTagName('rect')[0];\n"
	"var "
	"fs=num(g,'s'),fn=num(g,'n'),fd=num(g,'d'),row=fd===0?0:fd-base;g.classList.remove('anc');"
	"\n"
	"if((fd>0&&row<1)||row>ROWS-1){g.style.display='none';continue;}\n"
	"if(fd<d&&fs<=s&&fs+fn>=s+n){r.setAttribute('x',PAD);r.setAttribute('width',W-2*PAD);g."
	"classList.add('anc');}\n"
	"else if(fd>=d&&fs>=s&&fs+fn<=s+n){var "
	"w=fn*sc;if(w<0.1){g.style.display='none';continue;}r.setAttribute('x',(PAD+(fs-s)*sc)."
	"toFixed(2));r.setAttribute('width',w.toFixed(2));}\n"
	"else{g.style.display='none';continue;}\n"
	"g.style.display='';r.setAttribute('y',(H-BOT-(row+1)*FH).toFixed(1));g.classList.toggle('"
	"more',row===ROWS-1&&num(g,'h')>fd);fit(g);}\n",
	"document.getElementById('reset').style.opacity=d>0?1:0.4;if(term!==null)paint();}\n"
	"function unzoom(){var "
	"all=document.querySelector('.f[data-d=\"0\"]');if(all)zoom(all);zoomFrame=null;}\n"
	"function search(){var t=window.prompt('Search for (regular "
	"expression):',term||'');if(t===null)return;if(t===''){clearSearch();return;}\n"
	"try{new RegExp(t);}catch(e){window.alert('Bad expression: "
	"'+e.message);return;}term=t;paint();document.getElementById('clear').style.display='';}\n"
	"function paint(){var re=new RegExp(term),iv=[],total=0,hid=[],mores=[];\n"
	"for(var i=0;i<frames.length;i++){var g=frames[i],r=g.getElementsByTagName('rect')[0];\n"
	"if(num(g,'d')===0)total=num(g,'n');if(!(i in orig))orig[i]=r.getAttribute('fill');\n"
	"if(isMore(g)&&g.style.display!=='none')mores.push(g);\n"
	"if(re.test(nameOf(g))){r.setAttribute('fill','rgb(230,0,230)');iv.push([num(g,'s'),num(g,'"
	"s')+num(g,'n')]);if(g.style.display==='none')hid.push(g);}\n"
	"else r.setAttribute('fill',orig[i]);}\n"
	"for(var k=0;k<mores.length;k++){var "
	"e=mores[k],es=num(e,'s'),en=num(e,'n'),ed=num(e,'d');\n"
	"for(var j=0;j<hid.length;j++){var "
	"hs=num(hid[j],'s');if(num(hid[j],'d')>ed&&hs>=es&&hs+num(hid[j],'n')<=es+en){e."
	"getElementsByTagName('rect')[0].setAttribute('fill','rgb(230,0,230)');break;}}}\n"
	"iv.sort(function(a,b){return a[0]-b[0];});var sum=0,end=-1;\n"
	"for(var k=0;k<iv.length;k++){var "
	"a=Math.max(iv[k][0],end);if(iv[k][1]>a){sum+=iv[k][1]-a;end=iv[k][1];}}\n"
	"matched.textContent='Matched: '+(total?(100*sum/total).toFixed(2):'0')+'%';}\n"
	"function clearSearch(){for(var i in "
	"orig)frames[i].getElementsByTagName('rect')[0].setAttribute('fill',orig[i]);term=null;"
	"matched.textContent=' ';document.getElementById('clear').style.display='none';}\n"
	"]]></script>\n",
};

/* Writes the script with its constants filled in. */
static int emit_script(const svg_ctx *c, sp_out *o)
{
	const char *keys[] = { "SP_W",   "SP_PAD",  "SP_CW",   "SP_FH", "SP_H",
		               "SP_BOT", "SP_ROWS", "SP_KEEP", "SP_FIT" };
	enum {
		NKEYS = sizeof(keys) / sizeof(keys[0])
	};
	char vals[NKEYS][16];
	snprintf(vals[0], sizeof(vals[0]), "%d", SVG_W);
	snprintf(vals[1], sizeof(vals[1]), "%d", SVG_PAD);
	snprintf(vals[2], sizeof(vals[2]), "%.1f", SVG_CHAR_W);
	snprintf(vals[3], sizeof(vals[3]), "%d", SVG_FH);
	snprintf(vals[4], sizeof(vals[4]), "%u", c->height);
	snprintf(vals[5], sizeof(vals[5]), "%d", SVG_BOTTOM);
	snprintf(vals[6], sizeof(vals[6]), "%u", c->rows);
	snprintf(vals[7], sizeof(vals[7]), "%d", SVG_KEEP);
	snprintf(vals[8], sizeof(vals[8]), "%d", SVG_FIT_ROWS);
	for (size_t part = 0; part < sizeof(svg_script) / sizeof(svg_script[0]); part++) {
		const char *s = svg_script[part];
		while (*s) {
			int hit = -1;
			for (int k = 0; k < NKEYS; k++)
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
	        ".more rect{stroke:#333;stroke-width:1;stroke-dasharray:3,2;}\n"
	        "#hint{font-size:11px;fill:#555;}\n"
	        "#title{font-size:17px;}\n.btn{cursor:pointer;fill:#003;}\n.btn:hover{fill:#06c;}\n"
	        "</style>\n");
	emit_script(c, o);
	sp_out_printf(o,
	              "<rect id=\"bg\" x=\"0\" y=\"0\" width=\"%d\" height=\"%u\" "
	              "fill=\"#f4f4ee\"/>\n",
	              SVG_W, c->height);
	sp_out_printf(o, "<text id=\"title\" x=\"%d\" y=\"24\" text-anchor=\"middle\">", SVG_W / 2);
	sp_out_xml(o, title, strlen(title));
	sp_out_str(o, "</text>\n");
	if (c->folded)
		sp_out_printf(o,
		              "<text id=\"hint\" x=\"%d\" y=\"40\" text-anchor=\"middle\">Deeper "
		              "stacks end in a dashed +N box: click it to expand</text>\n",
		              SVG_W / 2);
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
static int close_frame(svg_ctx *c, const open_frame *of, uint32_t d, uint64_t x)
{
	sp_name nm;
	int kb;
	if (d == 0) {
		sp_name_label(c->p, of->thread, c->flags, &nm);
		kb = SP_KIND_ROOT;
	} else {
		sp_name_frame(c->p, c->f->cframe[of->id], c->flags, &nm);
		kb = (unsigned char)sp_folded_kind(c->p, c->f, of->id);
	}
	return emit_frame(c, kb, &nm, d + 1, of->maxd, of->start, x - of->start);
}

/* Measures instead of emitting: the deepest drawn frame, the deepest one
 * with a label and the deepest hot one (SVG_HOT_PCT of the total). */
static int measure_frame(svg_ctx *c, const open_frame *of, uint32_t d, uint64_t x)
{
	uint64_t n = x - of->start;
	if ((double)n * c->scale >= SVG_MIN_W && d + 1 > c->deepest)
		c->deepest = d + 1;
	if ((double)n * c->scale >= SVG_LABEL_W && d + 1 > c->labelled)
		c->labelled = d + 1;
	if (n > 0 && (double)n * 100 >= (double)c->total * SVG_HOT_PCT && d + 1 > c->hot)
		c->hot = d + 1;
	return 0;
}

typedef int (*frame_fn)(svg_ctx *c, const open_frame *of, uint32_t d, uint64_t x);

/* Closes open frame st[d], handing it to @p fn, and passes the depth of
 * its deepest drawn callee to its caller (a frame too narrow to draw has
 * only callees as narrow). */
static int close_open(svg_ctx *c, uint32_t d, uint64_t x, frame_fn fn)
{
	const open_frame *of = &c->st[d];
	if (d > 0 && (double)(x - of->start) * c->scale >= SVG_MIN_W &&
	    of->maxd > c->st[d - 1].maxd)
		c->st[d - 1].maxd = of->maxd;
	return fn(c, of, d, x);
}

/* One pass over the folded lines with a stack of open frames: @p fn gets
 * each frame once its last line is past, callees before callers. */
static int walk(svg_ctx *c, frame_fn fn)
{
	const sp_folded *f = c->f;
	uint32_t nopen = 0;
	uint64_t x = 0;
	int rc = 0;
	for (size_t i = 0; i < f->n && !rc; i++) {
		const sp_folded_line *l = &f->lines[i];
		uint32_t depth = sp_folded_path(f, i, c->path);
		/* Frames shared with the open ones stay open. */
		uint32_t d = 0;
		if (nopen > 0 && c->st[0].id == l->label) {
			d = 1;
			while (d < nopen && d <= depth && c->st[d].id == c->path[d - 1])
				d++;
		}
		while (nopen > d && !rc) {
			nopen--;
			rc = close_open(c, nopen, x, fn);
		}
		if (nopen == 0)
			c->st[nopen++] = (open_frame){ l->label, l->thread, x, 1 };
		for (; nopen <= depth; nopen++)
			c->st[nopen] = (open_frame){ c->path[nopen - 1], l->thread, x, nopen + 1 };
		x += l->count;
	}
	while (nopen > 0 && !rc) {
		nopen--;
		rc = close_open(c, nopen, x, fn);
	}
	return rc;
}

int sp_export_svg(const struct stackpulse_profile *p, const stackpulse_export_opts *opts,
                  sp_out *out)
{
	sp_folded f;
	int rc = sp_folded_build(p, opts->flags, &f);
	if (rc)
		return rc;
	svg_ctx c;
	memset(&c, 0, sizeof(c));
	c.out = out;
	c.p = p;
	c.f = &f;
	c.flags = opts->flags;
	c.total = f.total;
	c.timed = p->time != STACKPULSE_TIME_SAMPLES;
	c.scale = f.total ? (double)(SVG_W - 2 * SVG_PAD) / (double)f.total : 0;
	c.st = sp_calloc(f.max_depth + 1, sizeof(*c.st));
	c.path = sp_calloc(f.max_depth + 1, sizeof(uint32_t));
	if (!c.st || !c.path) {
		sp_free(c.st);
		sp_free(c.path);
		sp_folded_free(&f);
		return sp_error(-ENOMEM, "svg frame stack");
	}
	/* Rows: every level when they fit the view (SVG_FIT_ROWS). Else up
	 * to the deepest frame with a label and one row of its callees, as far
	 * as the view holds, or further to a hot frame: towers too thin for a
	 * label fold into expanders at the top (a start-up sample 280 frames
	 * deep costs one row), and one of less than a tenth of the time never
	 * pushes the root out of view. */
	rc = walk(&c, measure_frame);
	uint32_t levels = c.deepest + 1; /* Plus the "all" frame. */
	uint32_t want = c.labelled + 2 < SVG_FIT_ROWS ? c.labelled + 2 : SVG_FIT_ROWS;
	if (c.hot + 2 > want)
		want = c.hot + 2;
	c.rows = levels <= SVG_FIT_ROWS || levels < want ? levels : want;
	if (c.rows > SVG_MAX_ROWS)
		c.rows = SVG_MAX_ROWS;
	c.folded = levels > c.rows;
	c.height = SVG_TOP + SVG_BOTTOM + c.rows * SVG_FH;
	if (!rc)
		rc = emit_header(&c, opts->title ? opts->title : "Flame Graph");
	if (!rc)
		rc = walk(&c, close_frame);
	if (!rc) {
		sp_name all = { .s = { "all" }, .n = { 3 }, .k = 1 };
		rc = emit_frame(&c, SP_KIND_ROOT, &all, 0, c.deepest, 0, f.total);
	}
	if (!rc)
		rc = sp_out_str(out, "</svg>\n");
	sp_free(c.st);
	sp_free(c.path);
	sp_folded_free(&f);
	return rc;
}
