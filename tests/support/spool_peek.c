#include "spool_peek.h"

#include "format/spool_internal.h"

int sp_spool_ksym_at(const stackpulse_spool *s, uint32_t i, uint64_t *addr, const char **name,
                     const char **module)
{
	if (i >= s->nksyms)
		return STACKPULSE_ENOTFOUND;
	*addr = s->ksyms[i].addr;
	*name = s->ksyms[i].name;
	*module = s->ksyms[i].module;
	return 0;
}

uint32_t sp_spool_stat_count(const stackpulse_spool *s)
{
	return s->nstats;
}

int sp_spool_stat_at(const stackpulse_spool *s, uint32_t i, uint32_t *key, uint64_t *value)
{
	if (i >= s->nstats)
		return STACKPULSE_ENOTFOUND;
	*key = s->stats[i].key;
	*value = s->stats[i].value;
	return 0;
}

int sp_spool_has_meta(const stackpulse_spool *s)
{
	return s->has_meta;
}
