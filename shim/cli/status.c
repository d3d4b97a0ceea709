/* status, reset: the operator's view of the shared table, and the way to
 * say "the server is back, stop waiting". See cli.h. */
#include "cli.h"

#include "addr.h"
#include "clock.h"
#include "errname.h"
#include "readfile.h"
#include "shtab.h"
#include "table.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/futex.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char status_usage[] =
	"Usage: backoffshim status [--json | --prometheus] [--table PATH | --user NAME]\n"
	"\n"
	"Shows every destination of the shared table that is failing or on\n"
	"probation: its address, consecutive failures, last error, time until its\n"
	"next attempt, threads and processes waiting now in a blocking connect, the\n"
	"age of its last attempt, and the\n"
	"counters kept since the entry was made (attempts, failures, waits, time\n"
	"waited, give-ups).\n"
	"\n"
	"Options:\n"
	"  --json          one JSON document: an array of objects\n"
	"  --prometheus    Prometheus text exposition (node_exporter's textfile\n"
	"                  collector)\n"
	"  --table PATH    the table at PATH (default: as BACKOFFSHIM_SHARED and the\n"
	"                  config say; 'user' is this user's table in /dev/shm)\n"
	"  --user NAME     another user's table (root)\n"
	"  -h, --help      show this help\n"
	"\n"
	"Exit status: 0; 1 if the table cannot be read; 2 on a usage error.\n";

static const char reset_usage[] =
	"Usage: backoffshim reset DEST | --all [--table PATH | --user NAME]\n"
	"\n"
	"Clears the backoff state of DEST (ADDR:PORT or [V6]:PORT, as in [dest]\n"
	"sections) or of every destination, and wakes every process waiting on it:\n"
	"their next attempt goes out at once (a parked non-blocking socket within\n"
	"250 ms).\n"
	"\n"
	"Exit status: 0; 1 if the table cannot be opened; 2 on a usage error.\n";

enum format { TEXT, JSON, PROMETHEUS };

struct opts {
	enum format format;
	const char *table;
	const char *user;
	int all;
	const char *dest;
};

static int parse(int argc, char **argv, const char *sub, const char *usage, struct opts *o)
{
	static const struct option longopts[] = {
		{"json", no_argument, NULL, 'j'},
		{"prometheus", no_argument, NULL, 'p'},
		{"table", required_argument, NULL, 't'},
		{"user", required_argument, NULL, 'u'},
		{"all", no_argument, NULL, 'a'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c;
	int is_status = !strcmp(sub, "status");
	optind = 1;
	while ((c = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
		case 'p':
			if (!is_status)
				return bs_cli_usage(sub, "unknown option '%s'", argv[optind - 1]);
			o->format = c == 'j' ? JSON : PROMETHEUS;
			break;
		case 't': o->table = optarg; break;
		case 'u': o->user = optarg; break;
		case 'a':
			if (is_status)
				return bs_cli_usage(sub, "unknown option '--all'");
			o->all = 1;
			break;
		case 'h': fputs(usage, stdout); return 0;
		default: return bs_cli_bad_option(sub, c, argv);
		}
	}
	if (o->table && o->user)
		return bs_cli_usage(sub, "--table and --user exclude each other");
	if (!is_status) {
		if (optind < argc)
			o->dest = argv[optind++];
		if (!o->all == !o->dest)
			return bs_cli_usage(sub, "name one destination, or --all");
	}
	if (optind < argc)
		return bs_cli_usage(sub, "unexpected argument '%s'", argv[optind]);
	return -1;
}

static const char *get_env(void *ctx, const char *name)
{
	(void)ctx;
	return getenv(name);
}

static void quiet(void *ctx, const char *origin, unsigned line, const char *key,
		  const char *value, const char *why)
{
	(void)ctx, (void)origin, (void)line, (void)key, (void)value, (void)why;
}

static uint64_t netns_inode(void)
{
	struct stat st;
	return stat("/proc/self/ns/net", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* The table's path and owner; 0, or 1 with a message printed. */
static int table_path(const struct opts *o, char *path, size_t n, uid_t *owner, int *explicit_path)
{
	*owner = geteuid();
	*explicit_path = 0;
	if (o->table) {
		snprintf(path, n, "%s", o->table);
		*explicit_path = 1;
		return 0;
	}
	if (o->user) {
		struct passwd *pw = getpwnam(o->user);
		if (!pw) {
			fprintf(stderr, "backoffshim: no user named '%s'\n", o->user);
			return 1;
		}
		*owner = pw->pw_uid;
	} else {
		static struct bs_rules rules;
		struct bs_config cfg;
		bs_config_load_rules(&cfg, &rules, get_env, bs_read_file_libc, quiet, NULL);
		if (!strcmp(cfg.shared, "off")) {
			fprintf(stderr, "backoffshim: sharing is off (shared = off): each process "
					"keeps its own table\n");
			return 1;
		}
		if (cfg.shared[0] == '/') {
			snprintf(path, n, "%s", cfg.shared);
			*explicit_path = 1;
			return 0;
		}
	}
	return bs_shtab_user_path(path, n, "/dev/shm", *owner, netns_inode()) ? 0 : 1;
}

/* The table mapped (read-only unless writable), or NULL with a message. */
static struct bs_table *map_table(const struct opts *o, int writable, int *absent)
{
	char path[512];
	uid_t owner;
	int explicit_path;
	*absent = 0;
	if (table_path(o, path, sizeof path, &owner, &explicit_path))
		return NULL;
	int fd = open(path, (writable ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		*absent = errno == ENOENT;
		if (!*absent)
			fprintf(stderr, "backoffshim: %s: %s\n", path, strerror(errno));
		return NULL;
	}
	struct stat st;
	struct bs_shtab_header h;
	memset(&h, 0, sizeof h);
	fstat(fd, &st);
	if (pread(fd, &h, sizeof h, 0) < 0)
		memset(&h, 0, sizeof h);
	struct bs_shtab_stat s = {S_ISREG(st.st_mode), st.st_uid, st.st_mode, (uint64_t)st.st_size};
	enum bs_shtab_verdict v = bs_shtab_check(&s, &h, owner, explicit_path);
	if (v != BS_SHTAB_OK) {
		fprintf(stderr, "backoffshim: %s: %s\n", path, bs_shtab_verdict_text(v));
		close(fd);
		return NULL;
	}
	void *m = mmap(NULL, BS_SHTAB_SIZE, PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED) {
		fprintf(stderr, "backoffshim: %s: cannot map it: %s\n", path, strerror(errno));
		return NULL;
	}
	return (struct bs_table *)(void *)((char *)m + BS_SHTAB_OFFSET);
}

/* One destination's row, read once from the (untrusted) mapping. */
struct row {
	char dest[128];
	uint32_t failures, waiting, procs, attempts, fails, waits, giveups;
	int probation, last_err;
	double next_in, last_age, waited;
};

static int key_is_valid(uint64_t k)
{
	return k && !(k & (BS_TABLE_RES | BS_TABLE_DEAD));
}

/* The live processes listed as waiting on slot i (pids as this process's
 * pid namespace sees them). */
static uint32_t waiting_processes(const struct bs_table *t, unsigned i)
{
	uint32_t seen[BS_TABLE_WAITER_PIDS], n = 0;
	for (unsigned k = 0; k < BS_TABLE_WAITER_PIDS; k++) {
		uint32_t pid = atomic_load(&((struct bs_table *)(uintptr_t)t)->waiter_pids[i][k]);
		int dup = 0;
		for (uint32_t j = 0; j < n; j++)
			dup |= seen[j] == pid;
		if (pid && pid < 1u << 22 && !dup && (kill((pid_t)pid, 0) == 0 || errno == EPERM))
			seen[n++] = pid;
	}
	return n;
}

/* Slot i as a row, if it is failing or on probation and its address is
 * the one its key says. */
static int read_row(const struct bs_table *t, unsigned i, uint64_t now, struct row *r)
{
	uint64_t k = atomic_load(&((struct bs_table *)(uintptr_t)t)->keys[i]);
	struct bs_entry *e = (struct bs_entry *)(uintptr_t)&t->entries[i];
	uint64_t s = atomic_load(&e->state);
	if (!key_is_valid(k) || (!bs_state_failures(s) && !(s & BS_PROBATION)))
		return 0;
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof ss);
	uint32_t len = bs_table_get_addr(t, i, &ss);
	if (!len || bs_addr_key((struct sockaddr *)&ss, len) != k ||
	    !bs_addr_format((struct sockaddr *)&ss, len, r->dest, sizeof r->dest))
		return 0;
	uint64_t next = bs_state_next_at(s), at = atomic_load(&e->attempt_at);
	r->failures = bs_state_failures(s);
	r->probation = (s & BS_PROBATION) != 0;
	r->last_err = (int)atomic_load(&e->last_err);
	r->next_in = r->probation || next <= now ? 0 : (double)(next - now) / 1e9;
	r->last_age = at && at <= now ? (double)(now - at) / 1e9 : -1;
	r->waiting = atomic_load(&e->waiting);
	r->procs = waiting_processes(t, i);
	r->attempts = atomic_load(&e->n_attempts);
	r->fails = atomic_load(&e->n_failures);
	r->waits = atomic_load(&e->n_waited);
	r->waited = atomic_load(&e->waited_ms) / 1e3;
	r->giveups = atomic_load(&e->n_giveups);
	return 1;
}

static const char *err_name(int e)
{
	const char *n = e > 0 ? bs_errno_name(e) : NULL;
	return n ? n : "-";
}

static void print_text(const struct row *r, unsigned n)
{
	if (!n) {
		puts("no destination is backing off");
		return;
	}
	printf("%-28s %8s %-13s %10s %7s %5s %10s %8s %8s %6s %9s %7s\n", "DESTINATION",
	       "FAILURES", "LAST ERROR", "NEXT IN", "THREADS", "PROCS", "LAST TRY", "ATTEMPTS",
	       "FAILED", "WAITS", "WAITED", "GAVE UP");
	for (unsigned i = 0; i < n; i++) {
		char next[32], age[32];
		if (r[i].probation)
			snprintf(next, sizeof next, "probation");
		else
			snprintf(next, sizeof next, "%.1fs", r[i].next_in);
		if (r[i].last_age < 0)
			snprintf(age, sizeof age, "-");
		else
			snprintf(age, sizeof age, "%.1fs ago", r[i].last_age);
		printf("%-28s %8u %-13s %10s %7u %5u %10s %8u %8u %6u %8.1fs %7u\n", r[i].dest,
		       r[i].failures, err_name(r[i].last_err), next, r[i].waiting, r[i].procs, age,
		       r[i].attempts, r[i].fails, r[i].waits, r[i].waited, r[i].giveups);
	}
}

static void print_json(const struct row *r, unsigned n)
{
	putchar('[');
	for (unsigned i = 0; i < n; i++) {
		char age[32] = "null";
		if (r[i].last_age >= 0)
			snprintf(age, sizeof age, "%.3f", r[i].last_age);
		printf("%s\n  {\"destination\": \"%s\", \"failures\": %u, \"probation\": %s, "
		       "\"last_error\": \"%s\", \"next_attempt_in\": %.3f, \"waiting_threads\": %u, "
		       "\"waiting_processes\": %u, \"last_attempt_age\": %s, \"attempts\": %u, \"failed_attempts\": %u, "
		       "\"waits\": %u, \"seconds_waited\": %.3f, \"give_ups\": %u}",
		       i ? "," : "", r[i].dest, r[i].failures, r[i].probation ? "true" : "false",
		       err_name(r[i].last_err), r[i].next_in, r[i].waiting, r[i].procs, age,
		       r[i].attempts,
		       r[i].fails, r[i].waits, r[i].waited, r[i].giveups);
	}
	puts(n ? "\n]" : "]");
}

static void metric(const char *name, const char *type, const char *help, const struct row *r,
		   unsigned n, size_t field, int is_double)
{
	printf("# HELP backoffshim_%s %s\n# TYPE backoffshim_%s %s\n", name, help, name, type);
	for (unsigned i = 0; i < n; i++) {
		const char *p = (const char *)&r[i] + field;
		if (is_double)
			printf("backoffshim_%s{destination=\"%s\"} %.3f\n", name, r[i].dest,
			       *(const double *)(const void *)p);
		else
			printf("backoffshim_%s{destination=\"%s\"} %u\n", name, r[i].dest,
			       *(const uint32_t *)(const void *)p);
	}
}

static void print_prometheus(const struct row *r, unsigned n)
{
	metric("consecutive_failures", "gauge", "Failures since the destination last worked.", r,
	       n, offsetof(struct row, failures), 0);
	metric("next_attempt_seconds", "gauge", "Time until the next attempt may go out.", r, n,
	       offsetof(struct row, next_in), 1);
	metric("waiting_threads", "gauge", "Threads waiting in a blocking connect now.", r, n,
	       offsetof(struct row, waiting), 0);
	metric("waiting_processes", "gauge", "Processes with a thread waiting now.", r, n,
	       offsetof(struct row, procs), 0);
	metric("attempts_total", "counter", "Attempts whose outcome was recorded.", r, n,
	       offsetof(struct row, attempts), 0);
	metric("failures_total", "counter", "Failed attempts.", r, n,
	       offsetof(struct row, fails), 0);
	metric("waits_total", "counter", "Waits between attempts.", r, n,
	       offsetof(struct row, waits), 0);
	metric("waited_seconds_total", "counter", "Time spent waiting between attempts.", r, n,
	       offsetof(struct row, waited), 1);
	metric("give_ups_total", "counter", "Connects that gave up.", r, n,
	       offsetof(struct row, giveups), 0);
}

int bs_cmd_status(int argc, char **argv)
{
	struct opts o = {TEXT, NULL, NULL, 0, NULL};
	int st = parse(argc, argv, "status", status_usage, &o);
	if (st >= 0)
		return st;
	int absent;
	struct bs_table *t = map_table(&o, 0, &absent);
	if (!t && !absent)
		return 1;
	static struct row rows[BS_TABLE_SLOTS];
	unsigned n = 0;
	uint64_t now = bs_now();
	for (unsigned i = 0; t && i < BS_TABLE_SLOTS; i++)
		n += read_row(t, i, now, &rows[n]);
	if (o.format == JSON)
		print_json(rows, n);
	else if (o.format == PROMETHEUS)
		print_prometheus(rows, n);
	else
		print_text(rows, n);
	return 0;
}

static void wake_all(struct bs_entry *e)
{
	bs_entry_reset(e);
	syscall(SYS_futex, &e->seq, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
}

int bs_cmd_reset(int argc, char **argv)
{
	struct opts o = {TEXT, NULL, NULL, 0, NULL};
	int st = parse(argc, argv, "reset", reset_usage, &o);
	if (st >= 0)
		return st;
	struct bs_cli_dest d;
	uint64_t key = 0;
	if (o.dest) {
		if (bs_cli_dest_parse(o.dest, &d) || d.is_name)
			return bs_cli_usage("reset", "'%s' is not ADDR:PORT or [V6]:PORT", o.dest);
		key = bs_addr_key((struct sockaddr *)&d.ss, d.len);
	}
	int absent;
	struct bs_table *t = map_table(&o, 1, &absent);
	if (!t) {
		if (absent)
			puts("nothing to reset: no process has used the shared table");
		return absent ? 0 : 1;
	}
	unsigned n = 0;
	uint64_t now = bs_now();
	for (unsigned i = 0; i < BS_TABLE_SLOTS; i++) {
		struct row r;
		uint64_t k = atomic_load(&t->keys[i]);
		if (!read_row(t, i, now, &r) || (o.dest && k != key))
			continue;
		wake_all(&t->entries[i]);
		printf("reset %s (%u failures)\n", r.dest, r.failures);
		n++;
	}
	if (!n)
		printf("nothing to reset: %s is not backing off\n", o.dest ? o.dest : "no destination");
	return 0;
}
