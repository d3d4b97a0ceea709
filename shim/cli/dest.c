/* dest: schedule --dest, a destination as the library would see it, and the
 * [dest ...] section (or the global settings) that applies to it. */
#include "cli.h"
#include "addr.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

/* What the name resolved to (ctx: the struct bs_cli_dest); the library
 * asks its getaddrinfo() records the same question. */
static int name_has(void *ctx, uint64_t name, uint64_t key)
{
	const struct bs_cli_dest *d = ctx;
	if (!d->name || name != d->name)
		return 0;
	if (d->unresolved)
		return 1; /* preview the name's section anyway */
	for (unsigned i = 0; i < d->nkeys; i++)
		if (d->keys[i] == key)
			return 1;
	return 0;
}

static int parse_port(const char *s, unsigned *port)
{
	if (!*s || strlen(s) > 5 || strspn(s, "0123456789") != strlen(s))
		return -1;
	long p = strtol(s, NULL, 10);
	if (p < 1 || p > 65535)
		return -1;
	*port = (unsigned)p;
	return 0;
}

static int set_unix(struct bs_cli_dest *d, const char *path)
{
	struct sockaddr_un *un = (struct sockaddr_un *)&d->ss;
	if (!*path || strlen(path) >= sizeof un->sun_path)
		return -1;
	un->sun_family = AF_UNIX;
	memcpy(un->sun_path, path, strlen(path) + 1);
	d->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path) + 1);
	return 0;
}

static void resolve(struct bs_cli_dest *d, const char *host, unsigned port)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *res;
	char serv[8];
	snprintf(serv, sizeof serv, "%u", port);
	d->name = bs_name_hash(host, (unsigned)strlen(host));
	if (getaddrinfo(host, serv, &hints, &res) != 0) {
		struct sockaddr_in *in = (struct sockaddr_in *)&d->ss; /* 0.0.0.0:port */
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)port);
		d->len = sizeof *in;
		d->unresolved = 1;
		return;
	}
	memcpy(&d->ss, res->ai_addr, res->ai_addrlen);
	d->len = res->ai_addrlen;
	for (struct addrinfo *a = res; a; a = a->ai_next) {
		/* by address alone, as the library remembers names */
		uint64_t k = bs_addr_host_key(a->ai_addr, a->ai_addrlen);
		if (k && d->nkeys < BS_ARRAY_SIZE(d->keys))
			d->keys[d->nkeys++] = k;
	}
	freeaddrinfo(res);
}

int bs_cli_dest_parse(const char *text, struct bs_cli_dest *d)
{
	memset(d, 0, sizeof *d);
	d->text = text;
	if (strncmp(text, "unix:", 5) == 0)
		return set_unix(d, text + 5);
	const char *colon = strrchr(text, ':');
	unsigned port;
	if (!colon || colon == text || parse_port(colon + 1, &port))
		return -1;
	int v6 = text[0] == '['; /* [v6]:port */
	size_t hlen = (size_t)(colon - text);
	char host[256];
	if (hlen - 2 * v6 >= sizeof host ||
	    (v6 ? hlen < 3 || text[hlen - 1] != ']' : memchr(text, ':', hlen) || memchr(text, ']', hlen)))
		return -1;
	memcpy(host, text + v6, hlen - 2 * v6);
	host[hlen - 2 * v6] = '\0';
	struct sockaddr_in *in = (struct sockaddr_in *)&d->ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&d->ss;
	if (inet_pton(v6 ? AF_INET6 : AF_INET, host,
		      v6 ? (void *)&in6->sin6_addr : (void *)&in->sin_addr) == 1) {
		in->sin_family = v6 ? AF_INET6 : AF_INET; /* family and port: the same offsets in v6 */
		in->sin_port = htons((uint16_t)port);
		d->len = v6 ? sizeof *in6 : sizeof *in;
		return 0;
	}
	if (v6)
		return -1;
	d->is_name = 1;
	resolve(d, host, port);
	return 0;
}

const struct bs_config *bs_cli_dest_config(const struct bs_config *c,
					   const struct bs_cli_dest *d,
					   const struct bs_rule **rule)
{
	const struct bs_config *r = bs_config_for(c, (const struct sockaddr *)&d->ss, d->len,
						  name_has, (void *)d);
	*rule = NULL;
	for (unsigned i = 0; c->rules && i < c->rules->n; i++)
		if (r == &c->rules->r[i].cfg)
			*rule = &c->rules->r[i];
	return r;
}

static void where(FILE *f, const struct bs_rule *r)
{
	bs_cli_printable(f, r->origin, 200);
	if (r->line)
		fprintf(f, ":%u", r->line);
}

void bs_cli_dest_show(FILE *f, const struct bs_cli_dest *d, const struct bs_rule *rule)
{
	char a[128];
	fputs("destination: ", f);
	bs_cli_printable(f, d->text, 120);
	if (d->is_name) {
		bs_addr_format((const struct sockaddr *)&d->ss, d->len, a, sizeof a);
		if (!d->unresolved)
			fprintf(f, " (resolves to %s%s)", a, d->nkeys > 1 ? " and more" : "");
		else
			fputs(" (does not resolve here: only its name and *:port sections are judged)",
			      f);
	}
	if (rule) {
		fprintf(f, "\n  settings: [dest %s] (", rule->text);
		where(f, rule);
		fputs(") over the global [backoff] ones\n", f);
	} else {
		fputs("\n  settings: the global [backoff] ones (no [dest ...] section matches)\n", f);
	}
}

void bs_cli_rules_show(FILE *f, const struct bs_config *c)
{
	if (!c->rules || !c->rules->n)
		return;
	fputs("destination sections (preview one with --dest ADDR:PORT):\n", f);
	for (unsigned i = 0; i < c->rules->n; i++) {
		const struct bs_rule *r = &c->rules->r[i];
		fprintf(f, "  [dest %s] (", r->text);
		where(f, r);
		fputs(")\n", f);
	}
	fputs("settings below: the global [backoff] ones\n", f);
}
