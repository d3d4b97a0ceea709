/* config value parsers: locale-independent, reject NaN/inf/negatives/junk. */
#include "config.h"
#include "errname.h"
#include "util.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define MAX_DURATION (30ull * 24 * 3600 * BS_NS_PER_SEC) /* 30 days */

static const char *skip_ws(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

/* Trailing white space is allowed; anything else is junk. */
static int only_ws(const char *s)
{
	return *skip_ws(s) == '\0';
}

/* Decimal "123" or "1.25", after blanks and an optional '+' (a '-' is
 * refused): the integer part (below 1e18) and up to 9 fraction digits
 * scaled by 1e9. Sets *end past the digits. */
static int parse_fixed9(const char *s, uint64_t *ipart, uint64_t *frac9,
			const char **end, const char **why)
{
	uint64_t ip = 0, fp = 0;
	int nd = 0, nf = 0;
	s = skip_ws(s);
	if (*s == '-')
		return *why = "must not be negative", -1;
	if (*s == '+')
		s++;
	while (*s >= '0' && *s <= '9') {
		if (ip >= 100000000000000000ull) /* keeps ip * 10 + 9 below 1e18 */
			return *why = "too large", -1;
		ip = ip * 10 + (uint64_t)(*s++ - '0');
		nd++;
	}
	if (*s == '.') {
		s++;
		while (*s >= '0' && *s <= '9') {
			if (nf < 9) {
				fp = fp * 10 + (uint64_t)(*s - '0');
				nf++;
			}
			s++;
			nd++;
		}
	}
	if (nd == 0)
		return *why = "not a number", -1;
	for (int i = nf; i < 9; i++)
		fp *= 10;
	*ipart = ip;
	*frac9 = fp;
	*end = s;
	return 0;
}

/* "pre" + the n bytes at s (cut at 40) + "post" in msg (cap bytes): the
 * problem names the bad entry. Config parsing runs once, at start-up. */
static const char *naming_in(char *msg, size_t cap, const char *pre, const char *s, size_t n,
			     const char *post)
{
	size_t k = 0;
	for (const char *p = pre; *p && k < 60; p++)
		msg[k++] = *p;
	for (size_t i = 0; i < n && i < 40; i++) /* (a reason is printable ASCII) */
		msg[k++] = s[i] >= ' ' && s[i] <= '~' ? s[i] : '?';
	for (const char *p = post; *p && k < cap - 1; p++)
		msg[k++] = *p;
	msg[k] = 0;
	return msg;
}

/* naming_in a static buffer (one per use: a reason may quote another) */
#define NAMING(pre, s, n, post)                                        \
	({                                                             \
		static char msg_[200];                                 \
		naming_in(msg_, sizeof msg_, pre, s, n, post);         \
	})

/* A duration without its unit: "50" could mean 50 ms or 50 s, so the
 * problem names both, with the number as written (s up to end). */
static const char *bare_number(const char *s, const char *end)
{
	static char msg[100];
	s = skip_ws(s);
	int n = (int)(end - s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	n = n > 20 ? 20 : n;
	snprintf(msg, sizeof msg, "a duration needs its unit: write %.*sms or %.*ss", n, s, n, s);
	return msg;
}

int bs_parse_duration(const char *s, uint64_t *ns, const char **why)
{
	static const struct {
		const char *unit;
		uint64_t ns; /* per unit */
	} units[] = {
		{"ns", 1}, {"us", 1000}, {"ms", BS_NS_PER_MS}, {"s", BS_NS_PER_SEC},
		{"m", 60 * BS_NS_PER_SEC}, {"min", 60 * BS_NS_PER_SEC},
		{"h", 3600 * BS_NS_PER_SEC}, {"d", 86400 * BS_NS_PER_SEC},
	};
	uint64_t ip, fp;
	const char *end;
	if (parse_fixed9(s, &ip, &fp, &end, why))
		return -1;
	end = skip_ws(end);
	size_t ulen = 0;
	while ((end[ulen] >= 'a' && end[ulen] <= 'z') || (end[ulen] >= 'A' && end[ulen] <= 'Z'))
		ulen++;
	if (!ulen && (ip || fp) && only_ws(end))
		return *why = bare_number(s, end), -1;
	uint64_t mul = BS_NS_PER_SEC;
	if (ulen) {
		size_t i;
		for (i = 0; i < BS_ARRAY_SIZE(units); i++)
			if (strlen(units[i].unit) == ulen && strncmp(units[i].unit, end, ulen) == 0)
				break;
		if (i == BS_ARRAY_SIZE(units))
			return *why = NAMING("unknown unit '", end, ulen,
						"' (use ns, us, ms, s, m, h or d)"), -1;
		mul = units[i].ns;
	}
	if (!only_ws(end + ulen))
		return *why = "not a duration (e.g. 250ms, 1.5s, 2m)", -1;
	/* ip * mul + fp * mul / 1e9 ns; every mul divides or is a multiple of
	 * 1e9. Bound before multiplying. */
	uint64_t f = mul >= BS_NS_PER_SEC ? fp * (mul / BS_NS_PER_SEC)
					  : fp / (BS_NS_PER_SEC / mul);
	if (ip > MAX_DURATION / mul || ip * mul + f > MAX_DURATION)
		return *why = "too large (at most 30 days)", -1;
	*ns = ip * mul + f;
	return 0;
}

int bs_parse_number(const char *s, double *out, const char **why)
{
	uint64_t ip, fp;
	const char *end;
	if (parse_fixed9(s, &ip, &fp, &end, why))
		return -1;
	if (!only_ws(end))
		return *why = "not a number", -1;
	*out = (double)ip + (double)fp / 1e9;
	return 0;
}

int bs_parse_uint(const char *s, uint64_t max, uint64_t *out, const char **why)
{
	uint64_t v = 0;
	int nd = 0;
	s = skip_ws(s);
	if (*s == '-')
		return *why = "must not be negative", -1;
	while (*s >= '0' && *s <= '9') {
		unsigned d = (unsigned)(*s++ - '0');
		if (v > (max - d) / 10)
			return *why = "too large", -1;
		v = v * 10 + d;
		nd++;
	}
	if (nd == 0 || !only_ws(s))
		return *why = "not a whole number", -1;
	*out = v;
	return 0;
}

int bs_parse_errlist(const char *s, uint64_t set[BS_ERRSET_WORDS], const char **why)
{
	uint64_t tmp[BS_ERRSET_WORDS] = {0};
	int any = 0;
	while (*s) {
		while (*s == ' ' || *s == '\t' || *s == ',')
			s++;
		if (!*s)
			break;
		unsigned n = 0;
		while (s[n] && s[n] != ' ' && s[n] != '\t' && s[n] != ',')
			n++;
		int e = bs_errno_from_name(s, n);
		if (e <= 0 || e >= 64 * BS_ERRSET_WORDS)
			return *why = NAMING("unknown errno name '", s, n,
						"' (use names like ECONNREFUSED)"), -1;
		tmp[e / 64] |= 1ull << (e % 64);
		any = 1;
		s += n;
	}
	if (!any)
		return *why = "empty list", -1;
	memcpy(set, tmp, sizeof tmp);
	return 0;
}

#define NAMES(id, expected, ...)                                                     \
	static const char *const id##_words[] = {__VA_ARGS__};                       \
	const struct bs_names id = {id##_words, (int)BS_ARRAY_SIZE(id##_words), expected}
NAMES(bs_level_names, "not one of off, error, info, debug", "off", "error", "info", "debug");
NAMES(bs_policy_names, "not one of grpc, list, exponential, responsive, off", "grpc", "list",
      "exponential", "off", "responsive");
NAMES(bs_jmode_names, "not one of proportional, full, equal, decorrelated", "proportional",
      "full", "equal", "decorrelated");
NAMES(bs_nbmode_names, "not one of auto, defer, pace, retry, off", "retry", "pace", "off",
      "defer", "auto");
NAMES(bs_resolve_names, "not one of off, temporary, wait", "off", "temporary", "wait");
NAMES(bs_logfmt_names, "not one of text, json", "text", "json");
#undef NAMES

const char *bs_name_of(const struct bs_names *t, int v)
{
	return v >= 0 && v < t->n ? t->name[v] : "?";
}

int bs_parse_word(const char *s, const struct bs_names *t, int *out, const char **why)
{
	s = skip_ws(s);
	size_t n = strcspn(s, " \t");
	for (int i = 0; i < t->n; i++) {
		if (strlen(t->name[i]) == n && strncasecmp(s, t->name[i], n) == 0 && only_ws(s + n)) {
			*out = i;
			return 0;
		}
	}
	return *why = t->expected, -1;
}

int bs_parse_bool(const char *s, int *out, const char **why)
{
	static const char *const words[] = {"0", "off", "false", "no", "1", "on", "true", "yes"};
	static const struct bs_names bools = {words, (int)BS_ARRAY_SIZE(words),
					      "not on/off (or true/false, yes/no, 1/0)"};
	int i;
	if (bs_parse_word(s, &bools, &i, why))
		return -1;
	*out = i >= 4;
	return 0;
}

/* "0, 10ms, 100ms, 3s": up to BS_DELAYS_MAX durations, comma separated.
 * The last one is repeated for every later failure, so it may not be 0. */
int bs_parse_delays(const char *s, struct bs_policy *p, const char **why)
{
	uint64_t d[BS_DELAYS_MAX];
	uint32_t n = 0;
	char item[64];
	while (*s) {
		size_t len = strcspn(s, ",");
		if (n == BS_DELAYS_MAX)
			return *why = "more than 32 delays", -1;
		if (len >= sizeof item)
			return *why = "delay too long", -1;
		memcpy(item, s, len);
		item[len] = '\0';
		if (bs_parse_duration(item, &d[n], why)) {
			const char *t = item + strspn(item, " \t");
			char mid[120];
			snprintf(mid, sizeof mid, "': %s", *why);
			return *why = NAMING("delay '", t, strlen(t), mid), -1;
		}
		n++;
		s += len + (s[len] == ',');
	}
	if (!n)
		return *why = "empty list", -1;
	if (d[n - 1] == 0)
		return *why = "the last delay repeats, so it cannot be 0", -1;
	memcpy(p->delays, d, n * sizeof d[0]);
	p->ndelays = n;
	return 0;
}
