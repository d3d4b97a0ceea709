/* Unit tests for rules (destination specs, specificity) and config_rules
 * ([dest ...] sections, BACKOFFSHIM_DEST_RULES, the ambiguous-match error). */
#include "unit.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/un.h>

#include "addr.h"
#include "config.h"
#include "rules.h"

static struct sockaddr_storage ss;

static const struct sockaddr *sa(const char *ip, unsigned port, socklen_t *len)
{
	memset(&ss, 0, sizeof ss);
	if (strchr(ip, ':')) {
		struct sockaddr_in6 *a = (void *)&ss;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		inet_pton(AF_INET6, ip, &a->sin6_addr);
		*len = sizeof *a;
	} else {
		struct sockaddr_in *a = (void *)&ss;
		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)port);
		inet_pton(AF_INET, ip, &a->sin_addr);
		*len = sizeof *a;
	}
	return (const struct sockaddr *)&ss;
}

static const struct bs_config *for_dest(const struct bs_config *c, const char *ip,
				       unsigned port)
{
	socklen_t len;
	const struct sockaddr *a = sa(ip, port, &len);
	return bs_config_for(c, a, len, NULL, NULL);
}

static int score_ctx; /* what the name_has functions are given */

static int score_at(const struct bs_spec *s, const char *ip, unsigned port, bs_name_has_fn f)
{
	socklen_t len;
	const struct sockaddr *a = sa(ip, port, &len);
	return bs_spec_score(s, a, len, f, &score_ctx);
}

static int score(const char *spec, const char *ip, unsigned port)
{
	struct bs_spec s;
	const char *why;
	assert_int_equal(bs_spec_parse(spec, &s, &why), 0);
	return score_at(&s, ip, port, NULL);
}

static void test_parse(void **state)
{
	(void)state;
	struct bs_spec s;
	const char *why;
	static const char *good[] = {"127.0.0.1:6379", "[::1]:6379", "10.0.0.0/8", "10.0.0.0/8:5432",
				     "*:5432", "unix:/run/app.sock", "db.internal:5432", "10.1.2.3",
				     "[::1]", "::1", "[2001:db8::/32]:443"};
	for (unsigned i = 0; i < sizeof good / sizeof good[0]; i++)
		assert_int_equal(bs_spec_parse(good[i], &s, &why), 0);
	static const char *bad[] = {"", "*", "*:0", "1.2.3.4:70000", "10.0.0.0/33", "[::1", "unix:",
				    "db.internal", "db_internal:5", "1.2.3.4:x", "[::1]x"};
	for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++)
		assert_int_equal(bs_spec_parse(bad[i], &s, &why), -1);
}

static void test_matching_and_precedence(void **state)
{
	(void)state;
	assert_true(score("127.0.0.1:6379", "127.0.0.1", 6379) > 0);
	assert_true(score("127.0.0.1:6379", "127.0.0.1", 6380) < 0);
	assert_true(score("10.0.0.0/8", "10.9.8.7", 1) > 0);
	assert_true(score("10.0.0.0/8", "11.0.0.1", 1) < 0);
	assert_true(score("10.0.0.0/8:5432", "10.9.8.7", 5433) < 0);
	assert_true(score("*:53", "::1", 53) > 0);
	assert_true(score("[::1]:6379", "::1", 6379) > 0);
	assert_true(score("127.0.0.1:6379", "::ffff:127.0.0.1", 6379) > 0); /* v4-mapped */
	assert_true(score("[2001:db8::/32]:443", "2001:db8:1::5", 443) > 0);
	assert_true(score("[2001:db8::/32]:443", "2001:db9::5", 443) < 0);
	/* exact > longer prefix > shorter prefix > address with any port > *:port */
	int exact = score("10.1.2.3:80", "10.1.2.3", 80);
	int p16 = score("10.1.0.0/16", "10.1.2.3", 80);
	int p8port = score("10.0.0.0/8:80", "10.1.2.3", 80);
	int p8 = score("10.0.0.0/8", "10.1.2.3", 80);
	int addr = score("10.1.2.3", "10.1.2.3", 80);
	int port = score("*:80", "10.1.2.3", 80);
	assert_true(exact > p16 && p16 > p8port && p8port > p8 && p8 > addr && addr > port &&
		    port > 0);
}

static int name_has_42(void *ctx, uint64_t name, uint64_t key)
{
	(void)key;
	assert_ptr_equal(ctx, &score_ctx);
	return name == bs_name_hash("DB.internal", 11);
}

static void test_names_and_unix(void **state)
{
	(void)state;
	struct bs_spec s;
	const char *why;
	assert_int_equal(bs_spec_parse("db.internal:5432", &s, &why), 0);
	assert_true(score_at(&s, "10.0.0.7", 5432, name_has_42) > 0);
	assert_true(score_at(&s, "10.0.0.7", 5433, name_has_42) < 0);
	assert_true(score_at(&s, "10.0.0.7", 5432, NULL) < 0);
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	strcpy(un.sun_path, "/run/app.sock");
	assert_int_equal(bs_spec_parse("unix:/run/app.sock", &s, &why), 0);
	assert_true(bs_spec_score(&s, (struct sockaddr *)&un, sizeof un, NULL, NULL) > 0);
	strcpy(un.sun_path, "/run/other.sock");
	assert_true(bs_spec_score(&s, (struct sockaddr *)&un, sizeof un, NULL, NULL) < 0);
	/* an abstract name, written as status shows it: unix:@name */
	socklen_t abstract_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 4);
	memcpy(un.sun_path, "\0app", 4);
	assert_int_equal(bs_spec_parse("unix:@app", &s, &why), 0);
	assert_true(bs_spec_score(&s, (struct sockaddr *)&un, abstract_len, NULL, NULL) > 0);
	assert_true(bs_spec_score(&s, (struct sockaddr *)&un, abstract_len - 1, NULL, NULL) < 0);
	assert_int_equal(bs_spec_parse("unix:", &s, &why), -1);
}

/* [dest NAME:*] and name lookups (getaddrinfo's pseudo-addresses) */
static void test_name_lookups(void **state)
{
	(void)state;
	struct bs_spec s;
	const char *why;
	struct bs_name_addr a;
	const struct sockaddr *sa = (const struct sockaddr *)&a;
	assert_int_equal(bs_spec_parse("db:*", &s, &why), 0);
	assert_int_equal(s.kind, BS_SPEC_NAME);
	assert_int_equal(s.port, 0);
	struct bs_spec dbi;
	assert_int_equal(bs_spec_parse("db.internal:*", &dbi, &why), 0);
	assert_true(score_at(&dbi, "10.0.0.7", 1234, name_has_42) > 0); /* its addresses, any port */
	socklen_t len = bs_name_addr(&a, "DB", "5432");
	assert_true(bs_spec_score(&s, sa, len, NULL, NULL) > 0);
	len = bs_name_addr(&a, "db", NULL);
	assert_true(bs_spec_score(&s, sa, len, NULL, NULL) > 0);
	len = bs_name_addr(&a, "dbx", "5432");
	assert_true(bs_spec_score(&s, sa, len, NULL, NULL) < 0);
	/* NAME:PORT beats NAME:*, which beats *:PORT; addresses never match */
	struct bs_spec exact, port, addr;
	assert_int_equal(bs_spec_parse("db:5432", &exact, &why), 0);
	assert_int_equal(bs_spec_parse("*:5432", &port, &why), 0);
	assert_int_equal(bs_spec_parse("10.0.0.0/8", &addr, &why), 0);
	len = bs_name_addr(&a, "db", "5432");
	int se = bs_spec_score(&exact, sa, len, NULL, NULL), sw = bs_spec_score(&s, sa, len, NULL, NULL),
	    sp = bs_spec_score(&port, sa, len, NULL, NULL);
	assert_true(se > sw && sw > sp && sp > 0);
	assert_true(bs_spec_score(&addr, sa, len, NULL, NULL) < 0);
	len = bs_name_addr(&a, "db", "http");
	assert_true(bs_spec_score(&exact, sa, len, NULL, NULL) < 0);
	assert_true(bs_spec_score(&port, sa, len, NULL, NULL) < 0);
	/* a name without a port, or a bare '*:*', is still refused */
	assert_int_equal(bs_spec_parse("db", &s, &why), -1);
	assert_int_equal(bs_spec_parse("*:*", &s, &why), -1);
}

static unsigned nreports, lines[8];
static char whys[8][200];

static void report(void *ctx, const char *origin, unsigned line, const char *key,
		   const char *value, const char *why)
{
	(void)ctx, (void)origin, (void)key, (void)value;
	if (nreports < 8) {
		lines[nreports] = line;
		strncpy(whys[nreports], why, sizeof whys[0] - 1);
	}
	nreports++;
}

static struct bs_rules rules;

static void test_sections_and_ambiguity(void **state)
{
	(void)state;
	static const char ini[] = "[backoff]\n"            /* 1 */
				  "max_attempts = 7\n"     /* 2 */
				  "[dest 10.0.0.0/8]\n"    /* 3 */
				  "policy = list\n"        /* 4 */
				  "[dest *:53]\n"          /* 5 */
				  "policy = off\n"         /* 6 */
				  "unix = on\n"            /* 7: global only */
				  "[dest 10.9.0.0/8]\n"    /* 8: same as line 3 */
				  "policy = grpc\n"        /* 9: ignored with it */
				  "[backoff]\n"            /* 10 */
				  "jitter = 0.5\n";        /* 11 */
	struct bs_config c;
	bs_config_defaults(&c);
	c.rules = &rules;
	rules.n = 0;
	nreports = 0;
	bs_config_parse_ini(&c, "t.ini", ini, sizeof ini - 1, report, NULL);
	bs_config_finish(&c);
	assert_int_equal(nreports, 2);
	assert_int_equal(lines[0], 7);
	assert_int_equal(lines[1], 8);
	assert_non_null(strstr(whys[1], ":3")); /* points at the other section */
	assert_int_equal(rules.n, 2);
	const struct bs_config *d = for_dest(&c, "10.1.1.1", 80);
	assert_int_equal(d->policy.kind, BS_POLICY_LIST);
	assert_int_equal(d->max_attempts, 7);         /* inherited */
	assert_true(d->policy.jitter == 0.5);         /* set after the section */
	d = for_dest(&c, "1.1.1.1", 53);
	assert_int_equal(d->policy.kind, BS_POLICY_OFF);
	d = for_dest(&c, "1.1.1.1", 80);
	assert_ptr_equal(d, &c); /* no rule: the global settings */
}

static void test_env_rules(void **state)
{
	(void)state;
	struct bs_config c;
	bs_config_defaults(&c);
	c.rules = &rules;
	rules.n = 0;
	nreports = 0;
	bs_rule_env(&c, "127.0.0.1:6379=policy:list,delays:0,20ms,max_attempts:3;*:53=policy:off;"
			"bad spec=x:y;*:1=colour:red", report, NULL);
	bs_config_finish(&c);
	assert_int_equal(nreports, 2);
	assert_int_equal(rules.n, 3);
	const struct bs_config *d = for_dest(&c, "127.0.0.1", 6379);
	assert_int_equal(d->policy.kind, BS_POLICY_LIST);
	assert_int_equal(d->policy.ndelays, 2);
	assert_int_equal(d->max_attempts, 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_matching_and_precedence),
		cmocka_unit_test(test_names_and_unix),
		cmocka_unit_test(test_name_lookups),
		cmocka_unit_test(test_sections_and_ambiguity),
		cmocka_unit_test(test_env_rules),
	};
	return cmocka_run_group_tests_name("rules", tests, NULL, NULL);
}
