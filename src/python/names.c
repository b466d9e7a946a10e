/* Thread names from threading._active (see names.h). Pure: all target
 * memory comes through the walker's read callback. */
#include "python/names.h"

#include <errno.h>
#include <string.h>

#include "common/bytes.h"
#include "common/error.h"

#define TPFLAGS_INLINE_VALUES (1ull << 2)
#define TPFLAGS_MANAGED_DICT  (1ull << 4)
#define TPFLAGS_HEAPTYPE      (1ull << 9)
#define ENTRY_CHUNK           32u /* Dict entries read per call. */
#define KEY_READ              24u /* Characters of a key compared. */

/* Read errors that end the whole read (the process is gone, no memory);
 * the others only make one object unreadable. */
static int fatal(int rc)
{
	return rc < 0 && rc != STACKPULSE_ENOTFOUND && rc != STACKPULSE_EFORMAT &&
	       rc != STACKPULSE_ELIMIT;
}

static int read_word(sp_py_walker *w, uint64_t addr, uint64_t *v)
{
	uint8_t b[8];
	if (!sp_py_plausible(addr, 8))
		return STACKPULSE_EFORMAT;
	int rc = sp_py_mem_read1(&w->mem, addr, b, 8);
	if (rc == 0)
		*v = sp_le64(b);
	return rc;
}

/* ---- dicts ------------------------------------------------------------------ */

/* The entries of a dict's keys object, and where its values are. */
typedef struct dview {
	uint64_t keys;    /* The keys object. */
	uint64_t entries; /* Its first entry. */
	uint64_t values;  /* Split table: values[0]; else 0. */
	uint32_t n;       /* Entries in use (dk_nentries). */
	uint32_t esize;   /* 24 (hash, key, value) or 16 (key, value). */
	uint32_t koff;    /* The key's offset in an entry. */
} dview;

/* Views the keys object @p keys, with @p values the values array of a
 * split table (0: the values are in the entries). */
static int keys_view(sp_py_walker *w, uint64_t keys, uint64_t values, dview *v)
{
	const sp_py_layout *l = w->layout;
	uint8_t k[40];
	if (!sp_py_plausible(keys, 8) || (values && !sp_py_plausible(values, 8)))
		return STACKPULSE_EFORMAT;
	int rc = sp_py_mem_read1(&w->mem, keys, k, sizeof(k));
	if (rc)
		return rc;
	if ((int64_t)sp_le64(k) <= 0) /* dk_refcnt */
		return STACKPULSE_EFORMAT;
	uint64_t size, nentries, indices;
	if (!l->dict_keys_log2) {
		/* 3.10: dk_refcnt, dk_size, dk_lookup, dk_usable, dk_nentries,
		 * dk_indices; indices of 1, 2 or 4 bytes by the table's size. */
		size = sp_le64(k + 8);
		if (size < 8 || size > (1u << 20) || (size & (size - 1)))
			return STACKPULSE_EFORMAT;
		indices = size * (size <= 0xff ? 1 : size <= 0xffff ? 2 : 4);
		nentries = sp_le64(k + 32);
		v->entries = keys + 40 + indices;
		v->esize = 24;
		v->koff = 8;
	} else {
		/* 3.11+: dk_refcnt, dk_log2_size, dk_log2_index_bytes, dk_kind,
		 * dk_version, dk_usable, dk_nentries, dk_indices. Kind 0 has
		 * (hash, key, value) entries, 1 and 2 (unicode keys, split)
		 * (key, value). */
		uint32_t lg = k[8], lgi = k[9], kind = k[10];
		if (lg < 3 || lg > 20 || kind > 2)
			return STACKPULSE_EFORMAT;
		size = 1ull << lg;
		uint32_t ixlog = lg < 8 ? 0 : lg < 16 ? 1 : 2;
		if (lgi != lg + ixlog)
			return STACKPULSE_EFORMAT;
		indices = 1ull << lgi;
		nentries = sp_le64(k + 24);
		v->entries = keys + 32 + indices;
		v->esize = kind == 0 ? 24 : 16;
		v->koff = kind == 0 ? 8 : 0;
	}
	/* At most two thirds of the table are entries (USABLE_FRACTION). */
	if (nentries > size * 2 / 3 || nentries > SP_PY_DICT_ENTRIES_MAX)
		return STACKPULSE_EFORMAT;
	v->keys = keys;
	v->n = (uint32_t)nentries;
	v->values = values;
	return 0;
}

/* 0 with the dict header of @p dict in @p d when it is a live dict. */
static int dict_header(sp_py_walker *w, uint64_t dict, uint8_t *d)
{
	const sp_py_layout *l = w->layout;
	if (!sp_py_plausible(dict, 8))
		return STACKPULSE_EFORMAT;
	int rc = sp_py_mem_read1(&w->mem, dict, d, SP_PY_DICT_READ);
	if (rc)
		return rc;
	if ((int64_t)sp_le64(d) <= 0 || sp_le64(d + l->ob_type) != w->types.dict)
		return STACKPULSE_EFORMAT;
	return 0;
}

static int dict_view(sp_py_walker *w, uint64_t dict, dview *v)
{
	const sp_py_layout *l = w->layout;
	uint8_t d[SP_PY_DICT_READ];
	int rc = dict_header(w, dict, d);
	if (rc)
		return rc;
	uint64_t values = sp_le64(d + l->dict_values);
	if (values && SP_PY_USER_MAX - values < l->dictvalues_items)
		return STACKPULSE_EFORMAT;
	return keys_view(w, sp_le64(d + l->dict_keys), values ? values + l->dictvalues_items : 0,
	                 v);
}

/* Reads entries [@p from, @p from + @p k) (k <= ENTRY_CHUNK): their keys
 * and values (0 where none). */
static int entries(sp_py_walker *w, const dview *v, uint32_t from, uint32_t k, uint64_t *keys,
                   uint64_t *vals)
{
	uint8_t e[ENTRY_CHUNK * 24], vb[ENTRY_CHUNK * 8];
	sp_py_iov iov[2] = { { v->entries + (uint64_t)from * v->esize, e, k * v->esize, 0 },
		             { v->values + (uint64_t)from * 8, vb, k * 8, 0 } };
	int rc = sp_py_mem_read(&w->mem, iov, v->values ? 2 : 1);
	if (rc)
		return rc;
	for (uint32_t i = 0; i < k; i++) {
		const uint8_t *en = e + (size_t)i * v->esize;
		keys[i] = sp_le64(en + v->koff);
		vals[i] = v->values ? sp_le64(vb + 8 * (size_t)i) : sp_le64(en + v->koff + 8);
	}
	return 0;
}

/* 1 when @p hdr (a str object read with KEY_READ characters) is the
 * compact ASCII str @p name. */
static int str_is(const sp_py_walker *w, const uint8_t *hdr, const char *name)
{
	const sp_py_layout *l = w->layout;
	size_t n = strlen(name);
	uint32_t state = sp_le32(hdr + l->str_state);
	return sp_le64(hdr + l->ob_type) == w->types.unicode && ((state >> 2) & 7) == 1 &&
	       ((state >> 5) & 1) && ((state >> 6) & 1) && sp_le64(hdr + l->str_length) == n &&
	       memcmp(hdr + l->str_ascii, name, n) == 0;
}

/* Finds the entry whose key is the str @p name (at most KEY_READ
 * characters): its index, key and value. STACKPULSE_ENOTFOUND when none. */
static int find_key(sp_py_walker *w, const dview *v, const char *name, uint32_t *ix, uint64_t *key,
                    uint64_t *val)
{
	const sp_py_layout *l = w->layout;
	uint64_t keys[ENTRY_CHUNK], vals[ENTRY_CHUNK];
	uint8_t hdr[SP_PY_MAX_IOV][256];
	uint32_t hlen = l->str_ascii + KEY_READ;
	if (hlen > sizeof(hdr[0]) || strlen(name) > KEY_READ)
		return STACKPULSE_EINTERNAL;
	for (uint32_t at = 0; at < v->n; at += ENTRY_CHUNK) {
		uint32_t k = v->n - at < ENTRY_CHUNK ? v->n - at : ENTRY_CHUNK;
		int rc = entries(w, v, at, k, keys, vals);
		if (rc)
			return rc;
		for (uint32_t i = 0; i < k;) {
			sp_py_iov iov[SP_PY_MAX_IOV];
			uint32_t map[SP_PY_MAX_IOV], m = 0;
			for (; i < k && m < SP_PY_MAX_IOV; i++)
				if (sp_py_plausible(keys[i], 8)) {
					iov[m] = (sp_py_iov){ keys[i], hdr[m], hlen, 0 };
					map[m++] = i;
				}
			rc = sp_py_mem_read(&w->mem, iov, m);
			if (fatal(rc))
				return rc;
			for (uint32_t j = 0; j < m; j++)
				if (iov[j].ok && str_is(w, hdr[j], name)) {
					*ix = at + map[j];
					*key = keys[map[j]];
					*val = vals[map[j]];
					return 0;
				}
		}
	}
	return STACKPULSE_ENOTFOUND;
}

/* The value of key @p name in the dict at @p dict. */
static int dict_get(sp_py_walker *w, uint64_t dict, const char *name, uint64_t *val)
{
	dview v;
	uint32_t ix;
	uint64_t key;
	int rc = dict_view(w, dict, &v);
	if (rc == 0)
		rc = find_key(w, &v, name, &ix, &key, val);
	if (rc == 0 && !sp_py_plausible(*val, 8))
		rc = STACKPULSE_EFORMAT;
	return rc;
}

/* ---- objects ---------------------------------------------------------------- */

/* The index of "_name" in the shared keys @p keys of a class, remembered
 * (and checked again: its entry must still hold the same key). */
static int name_slot(sp_py_walker *w, sp_py_names_cache *c, uint64_t keys, uint32_t *ix)
{
	dview v;
	int rc = keys_view(w, keys, 0, &v);
	if (rc)
		return rc;
	for (uint32_t i = 0; i < c->nslot; i++) {
		if (c->slot[i].keys != keys || c->slot[i].ix >= v.n)
			continue;
		uint64_t k;
		if (read_word(w, v.entries + (uint64_t)c->slot[i].ix * v.esize + v.koff, &k) == 0 &&
		    k == c->slot[i].key) {
			*ix = c->slot[i].ix;
			return 0;
		}
	}
	uint64_t key, val;
	if ((rc = find_key(w, &v, "_name", ix, &key, &val)) != 0)
		return rc;
	uint32_t s = c->nslot < SP_PY_NAME_SLOTS ? c->nslot++ : c->next++ % SP_PY_NAME_SLOTS;
	c->slot[s].keys = keys;
	c->slot[s].key = key;
	c->slot[s].ix = *ix;
	return 0;
}

/* The _name of the Thread object at @p obj into @p out. */
static int thread_name(sp_py_walker *w, sp_py_names_cache *c, uint64_t obj, char *out)
{
	const sp_py_layout *l = w->layout;
	uint8_t pre[48], tb[SP_PY_MAX_BLOCK];
	/* The object and, 3.11+, the managed pointers before it. */
	uint32_t before = l->managed == SP_PY_MANAGED_NONE ? 0 : 32;
	if (!sp_py_plausible(obj, 8) || obj < 4096 + before)
		return STACKPULSE_EFORMAT;
	int rc = sp_py_mem_read1(&w->mem, obj - before, pre, before + 16);
	if (rc)
		return rc;
	const uint8_t *ob = pre + before;
	uint64_t type = sp_le64(ob + l->ob_type);
	if ((int64_t)sp_le64(ob) <= 0 || !sp_py_plausible(type, 8))
		return STACKPULSE_EFORMAT;
	uint32_t tlen = l->type_cached_keys + 8;
	const uint32_t tf[] = { l->type_basicsize, l->type_flags, l->type_dictoffset };
	for (size_t i = 0; i < 3; i++)
		if (tf[i] + 8 > tlen)
			tlen = tf[i] + 8;
	if ((rc = sp_py_mem_read1(&w->mem, type, tb, tlen)) != 0)
		return rc;
	uint64_t flags = sp_le64(tb + l->type_flags), basic = sp_le64(tb + l->type_basicsize);
	int64_t dictoff = (int64_t)sp_le64(tb + l->type_dictoffset);
	if (!(flags & TPFLAGS_HEAPTYPE) || basic < 16 || basic > 4096)
		return STACKPULSE_EFORMAT;
	uint64_t dict = 0, values = 0, keys = sp_le64(tb + l->type_cached_keys);
	uint32_t cap = UINT32_MAX;
	if (l->managed != SP_PY_MANAGED_NONE && (flags & TPFLAGS_MANAGED_DICT)) {
		uint64_t m3 = sp_le64(pre + 8); /* 3 words before the object */
		if (l->managed == SP_PY_MANAGED_311) {
			values = sp_le64(pre); /* 4 words before */
			dict = m3;
		} else if (l->managed == SP_PY_MANAGED_312) {
			if (m3 & 1)
				values = m3 + 1; /* stored as values - 1 */
			else
				dict = m3;
		} else if (m3) {
			dict = m3;
		} else if (flags & TPFLAGS_INLINE_VALUES) {
			/* capacity, size, embedded, valid, then values[]. */
			uint8_t vh[4];
			values = obj + basic;
			if ((rc = sp_py_mem_read1(&w->mem, values, vh, 4)) != 0)
				return rc;
			if (vh[3] != 1)
				return STACKPULSE_EFORMAT; /* invalidated: a dict took over */
			cap = vh[0];
		}
	} else if (dictoff > 0 && (uint64_t)dictoff + 8 <= basic) {
		if ((rc = read_word(w, obj + (uint64_t)dictoff, &dict)) != 0)
			return rc;
	} else {
		return STACKPULSE_EFORMAT;
	}
	uint64_t name = 0;
	if (dict) {
		dview v;
		if ((rc = dict_view(w, dict, &v)) != 0)
			return rc;
		if (v.values) {
			/* A split table: the class's keys, this object's values. */
			uint32_t ix;
			if ((rc = name_slot(w, c, v.keys, &ix)) != 0 ||
			    (rc = read_word(w, v.values + 8 * (uint64_t)ix, &name)) != 0)
				return rc;
		} else {
			uint32_t ix;
			uint64_t key;
			if ((rc = find_key(w, &v, "_name", &ix, &key, &name)) != 0)
				return rc;
		}
	} else if (values) {
		uint32_t ix;
		if (SP_PY_USER_MAX - values < l->dictvalues_items)
			return STACKPULSE_EFORMAT;
		if ((rc = name_slot(w, c, keys, &ix)) != 0)
			return rc;
		if (ix >= cap)
			return STACKPULSE_EFORMAT;
		if ((rc = read_word(w, values + l->dictvalues_items + 8 * (uint64_t)ix, &name)) !=
		    0)
			return rc;
	} else {
		return STACKPULSE_ENOTFOUND; /* no attributes yet */
	}
	return sp_py_read_str(w, name, out, SP_PY_TNAME_MAX);
}

/* A positive int of one to three 30-bit digits (a pthread_t). */
static int read_ident(sp_py_walker *w, uint64_t addr, uint64_t *out)
{
	const sp_py_layout *l = w->layout;
	uint8_t b[SP_PY_LONG_READ];
	if (!sp_py_plausible(addr, 8))
		return STACKPULSE_EFORMAT;
	int rc = sp_py_mem_read1(&w->mem, addr, b, SP_PY_LONG_READ);
	if (rc)
		return rc;
	if (sp_le64(b + l->ob_type) != w->types.long_)
		return STACKPULSE_EFORMAT;
	uint64_t tag = sp_le64(b + l->long_size), nd;
	if (l->long_tagged) {
		if (tag & 3) /* sign: 0 positive, 1 zero, 2 negative */
			return STACKPULSE_EFORMAT;
		nd = tag >> 3;
	} else {
		if ((int64_t)tag <= 0)
			return STACKPULSE_EFORMAT;
		nd = tag;
	}
	if (nd < 1 || nd > 3)
		return STACKPULSE_EFORMAT;
	uint64_t v = 0;
	for (uint32_t i = 0; i < nd; i++) {
		uint32_t d = sp_le32(b + l->long_digits + 4 * i);
		if (d >> 30 || (i == 2 && d >= 16))
			return STACKPULSE_EFORMAT;
		v |= (uint64_t)d << (30 * i);
	}
	*out = v;
	return v ? 0 : STACKPULSE_EFORMAT;
}

/* threading._active, through sys.modules and the module's dict. */
static int find_active(sp_py_walker *w, uint64_t interp, uint64_t *active)
{
	const sp_py_layout *l = w->layout;
	uint64_t modules, module, md;
	uint8_t mb[SP_PY_DICT_READ];
	int rc = sp_py_plausible(interp, 8) ? read_word(w, interp + l->interp_modules, &modules)
	                                    : STACKPULSE_EFORMAT;
	if (rc == 0)
		rc = dict_get(w, modules, "threading", &module);
	if (rc == 0)
		rc = sp_py_mem_read1(&w->mem, module, mb, SP_PY_DICT_READ);
	if (rc)
		return rc;
	if ((int64_t)sp_le64(mb) <= 0 || sp_le64(mb + l->ob_type) != w->types.module)
		return STACKPULSE_EFORMAT;
	md = sp_le64(mb + l->module_dict);
	if ((rc = dict_get(w, md, "_active", active)) != 0)
		return rc;
	return dict_header(w, *active, mb);
}

int sp_py_thread_names(sp_py_walker *w, uint64_t interp, sp_py_names_cache *c, sp_py_tname *out,
                       uint32_t max, uint32_t *n)
{
	const sp_py_layout *l = w->layout;
	*n = 0;
	if (!l->names || !w->types.dict || !w->types.long_ || !w->types.unicode ||
	    !w->types.module || sp_py_names_check(l) != 0)
		return STACKPULSE_EUNSUPPORTED;
	if (c->interp != interp) {
		memset(c, 0, sizeof(*c));
		c->interp = interp;
	}
	dview av;
	int rc = c->active ? dict_view(w, c->active, &av) : STACKPULSE_ENOTFOUND;
	if (rc) {
		/* Not found yet, or gone (an interpreter torn down): look again. */
		c->active = 0;
		if (fatal(rc))
			return rc;
		if ((rc = find_active(w, interp, &c->active)) == 0)
			rc = dict_view(w, c->active, &av);
		if (rc) {
			c->active = 0;
			return fatal(rc) ? rc : 0;
		}
	}
	if (av.n > SP_PY_MAX_THREADS * 2)
		return 0; /* far more than threads: not the dict it was */
	uint64_t keys[ENTRY_CHUNK], vals[ENTRY_CHUNK];
	for (uint32_t at = 0; at < av.n && *n < max; at += ENTRY_CHUNK) {
		uint32_t k = av.n - at < ENTRY_CHUNK ? av.n - at : ENTRY_CHUNK;
		rc = entries(w, &av, at, k, keys, vals);
		if (rc)
			return fatal(rc) ? rc : 0;
		for (uint32_t i = 0; i < k && *n < max; i++) {
			if (!keys[i] || !vals[i])
				continue; /* a deleted entry */
			rc = read_ident(w, keys[i], &out[*n].ident);
			if (rc == 0)
				rc = thread_name(w, c, vals[i], out[*n].name);
			if (fatal(rc))
				return rc;
			if (rc == 0)
				(*n)++;
		}
	}
	return 0;
}
