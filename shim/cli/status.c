/* status, reset: the operator's view of the shared table, and the way to
 * say "the server is back, stop waiting". See cli.h. Everything read from
 * the table is another process's word: checked before it is shown. */
#include "cli.h"

#include "addr.h"
#include "clock.h"
#include "errname.h"
#include "policy.h"
#include "shtab.h"
#include "table.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/futex.h>
#include <math.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/shm.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define LOCK_DIR "/dev/shm"

static const char status_usage[] =
	"Usage: backoffshim status [--json | --prometheus] [--table NAME | --user NAME]\n"
	"       backoffshim status --watch [SECONDS] [--table NAME | --user NAME]\n"
	"       backoffshim status --gc\n"
	"\n"
	"Shows every destination of the shared table that is failing or on\n"
	"probation, most urgent first: its address, consecutive failures, last\n"
	"error, time until its next attempt ('idle' once nobody has tried it for\n"
	"longer than max_backoff and its jitter: the next process starts its\n"
	"schedule over), threads and processes waiting now (live processes only),\n"
	"the age of its last attempt, and the counters kept since the entry was\n"
	"made (attempts, failures, waits, time waited, give-ups). As root, it also\n"
	"names the tables of other users.\n"
	"\n"
	"Options:\n"
	"  --json          one JSON document: an array of objects\n"
	"  --prometheus    Prometheus text exposition (node_exporter's textfile\n"
	"                  collector); idle destinations are left out\n"
	"  --table NAME    the table that shared = NAME names (default: as\n"
	"                  BACKOFFSHIM_SHARED and the config say)\n"
	"  --user NAME     another user's table (root)\n"
	"  --watch [SECONDS]\n"
	"                  redraw the table every SECONDS (2; 0.1 to 3600), as\n"
	"                  watch(1) would, until interrupted (Ctrl-C exits 0); on a\n"
	"                  terminal the screen is cleared and the rows fit in it,\n"
	"                  otherwise each table follows the last after a blank line\n"
	"  --gc            remove this user's tables (root: every user's) that no\n"
	"                  process has attached\n"
	"  -h, --help      show this help\n"
	"\n"
	"Exit status: 0; 1 if the table named cannot be found or read; 3 if it is\n"
	"damaged (backoffshim reset --all rebuilds it); 2 on a usage error.\n";

static const char reset_usage[] =
	"Usage: backoffshim reset DEST | --all [--table NAME | --user NAME]\n"
	"\n"
	"Clears the backoff state of DEST (ADDR:PORT or [V6]:PORT, as in [dest]\n"
	"sections, or a name lookup's NAME:SERVICE as status shows it) or of every\n"
	"destination, and wakes every process waiting on it:\n"
	"their next attempt goes out at once (a parked non-blocking socket within\n"
	"250 ms). --all also rebuilds a damaged table.\n"
	"\n"
	"Exit status: 0; 1 if the table cannot be opened; 2 on a usage error.\n";

enum format { TEXT, JSON, PROMETHEUS };

#define WATCH_DEFAULT 2.0
#define WATCH_MIN 0.1
#define WATCH_MAX 3600.0

struct opts {
	enum format format;
	const char *table;
	const char *user;
	int all, gc;
	const char *dest;
	double watch; /* seconds between tables; 0: show one */
};

/* --watch's SECONDS: 0, or the usage error. */
static int watch_seconds(const char *text, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(text, &end);
	if (end == text || *end || errno || !isfinite(v) || v < WATCH_MIN || v > WATCH_MAX)
		return bs_cli_usage("status", "--watch '%s': give SECONDS from %g to %g", text,
				    WATCH_MIN, WATCH_MAX);
	*out = v;
	return 0;
}

static int parse(int argc, char **argv, const char *sub, const char *usage, struct opts *o)
{
	static const struct option longopts[] = {
		{"json", no_argument, NULL, 'j'},
		{"prometheus", no_argument, NULL, 'p'},
		{"table", required_argument, NULL, 't'},
		{"user", required_argument, NULL, 'u'},
		{"all", no_argument, NULL, 'a'},
		{"gc", no_argument, NULL, 'g'},
		{"watch", optional_argument, NULL, 'w'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c;
	int is_status = !strcmp(sub, "status");
	optind = 1;
	while ((c = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
		const char *word = argv[optind - 1];
		/* the other subcommand's option: named as typed (up to any '='), as
		 * getopt names one it does not know at all */
		if (strchr(is_status ? "a" : "jpgw", c))
			return bs_cli_usage(sub, "unknown option '%.*s'", (int)strcspn(word, "="), word);
		switch (c) {
		case 'j':
		case 'p':
			if (o->format != TEXT && o->format != (c == 'j' ? JSON : PROMETHEUS))
				return bs_cli_usage(sub, "--json and --prometheus exclude each other");
			o->format = c == 'j' ? JSON : PROMETHEUS;
			break;
		case 't': o->table = optarg; break;
		case 'u': o->user = optarg; break;
		case 'a':
			o->all = 1;
			break;
		case 'g':
			o->gc = 1;
			break;
		case 'w':
			o->watch = WATCH_DEFAULT;
			/* --watch=S, or --watch S: a next word that is no option */
			if (!optarg && optind < argc && argv[optind][0] != '-')
				optarg = argv[optind++];
			if (optarg && watch_seconds(optarg, &o->watch))
				return BS_EXIT_USAGE;
			break;
		case 'h': fputs(usage, stdout); return 0;
		default: return bs_cli_bad_option(sub, c, argv);
		}
	}
	if (o->table && o->user)
		return bs_cli_usage(sub, "--table and --user exclude each other");
	if (o->gc && (o->table || o->user || o->format != TEXT || o->watch))
		return bs_cli_usage(sub, "--gc takes no other option");
	if (o->watch && o->format != TEXT)
		return bs_cli_usage(sub, "--watch shows the table as text: no --json or --prometheus");
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

/* Which table: its key and owner, and the settings (for idle); 0, or 1
 * with a message printed. */
struct where {
	int key;
	uid_t owner;
	struct bs_config cfg;
	char name[300];
};

static int locate(const struct opts *o, struct where *w)
{
	static struct bs_rules rules;
	bs_cli_load(&w->cfg, &rules, NULL, NULL, NULL);
	w->owner = geteuid();
	const char *name = w->cfg.shared[0] == '/' ? w->cfg.shared : "";
	if (o->table) {
		name = strcmp(o->table, "user") ? o->table : "";
	} else if (o->user) {
		struct passwd *pw = getpwnam(o->user);
		if (!pw) {
			fprintf(stderr, "backoffshim: no user named '%s'\n", o->user);
			return 1;
		}
		w->owner = pw->pw_uid;
		name = "";
	} else if (!strcmp(w->cfg.shared, "off")) {
		fprintf(stderr, "backoffshim: sharing is off (shared = off): each process "
				"keeps its own table\n");
		return 1;
	}
	snprintf(w->name, sizeof w->name, "%s", *name ? name : "user");
	struct stat ns; /* one table per network namespace */
	w->key = bs_shtab_key(w->owner, stat("/proc/self/ns/net", &ns) == 0 ? (uint64_t)ns.st_ino : 0,
			      name);
	return 0;
}

/* The table attached (read-only unless writable; a damaged header
 * rewritten if `repair`), or NULL: *absent when there is none, else a
 * message was printed; *damaged for a bad header. */
static struct bs_table *attach_table(const struct where *w, int writable, int repair,
				     int *absent, int *damaged)
{
	*absent = *damaged = 0;
	int id = shmget(w->key, 0, 0);
	struct shmid_ds ds;
	if (id < 0 || shmctl(id, IPC_STAT, &ds) != 0) {
		*absent = id < 0 && errno == ENOENT;
		if (!*absent)
			fprintf(stderr, "backoffshim: table %s: %s\n", w->name, strerror(errno));
		return NULL;
	}
	struct bs_shtab_stat st = {ds.shm_perm.uid, ds.shm_perm.cuid, ds.shm_perm.mode,
				   (uint64_t)ds.shm_segsz};
	enum bs_shtab_verdict v = bs_shtab_check_segment(&st, w->owner);
	if (v != BS_SHTAB_OK) {
		fprintf(stderr, "backoffshim: table %s: %s\n", w->name, bs_shtab_verdict_text(v));
		return NULL;
	}
	void *m = shmat(id, NULL, writable ? 0 : SHM_RDONLY);
	if (m == (void *)-1) {
		fprintf(stderr, "backoffshim: table %s: cannot attach it: %s\n", w->name,
			strerror(errno));
		return NULL;
	}
	struct bs_shtab_header h;
	memcpy(&h, m, sizeof h);
	v = bs_shtab_check_header(&h);
	*damaged = v == BS_SHTAB_BAD_HEADER;
	if (v != BS_SHTAB_OK && v != BS_SHTAB_NEW && !(*damaged && repair)) {
		fprintf(stderr, "backoffshim: table %s: %s%s\n", w->name, bs_shtab_verdict_text(v),
			*damaged ? "; backoffshim reset --all rebuilds it" : "");
		return NULL;
	}
	if (repair && v != BS_SHTAB_OK)
		bs_shtab_header_init((struct bs_shtab_header *)m);
	return (struct bs_table *)(void *)((char *)m + BS_SHTAB_OFFSET);
}

/* One destination's row, read once from the (untrusted) table. */
struct row {
	char dest[128];
	uint64_t key; /* the slot's, checked: what reset DEST matches */
	uint32_t failures, waiting, procs, attempts, fails, waits, giveups;
	int probation, last_err, idle;
	double next_in, last_age, waited;
	double next_at, last_at; /* wall clock, s (0: none) */
};

/* Is a process holding the lock on byte `at` of the table's lock file? */
static int lock_held(int fd, uint64_t at)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = (off_t)at, .l_len = 1};
	return fd >= 0 && fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
}

/* The processes waiting on slot i whose cell's lock is held (alive), and
 * their threads. */
static void live_waiters(struct bs_table *t, unsigned i, int lockfd, struct row *r)
{
	r->procs = r->waiting = 0;
	for (unsigned k = 0; k < BS_TABLE_WAITER_PIDS; k++) {
		uint64_t c = atomic_load(&t->waiters[i][k]);
		if (c && lock_held(lockfd, bs_shtab_waiter_byte(i, k))) {
			r->procs++;
			r->waiting += (uint32_t)c;
		}
	}
}

static double wall_of(uint64_t mono, uint64_t now_mono, double now_wall)
{
	return now_wall - ((double)now_mono - (double)mono) / 1e9;
}

/* Is the address kept for a slot the one its key k says? A name the
 * table kept only the start of cannot be checked (and is shown cut). */
static int addr_is_key(const struct sockaddr *a, uint32_t len, uint64_t k)
{
	if (a->sa_family == BS_AF_NAME)
		return len == BS_TABLE_ADDR_MAX || bs_name_keys_match(k, bs_name_key(a, len));
	return bs_addr_key(a, len) == k;
}

/* Slot i as a row, if it is failing or on probation and its address is
 * the one its key says. */
static int read_row(struct bs_table *t, unsigned i, uint64_t now, double wall,
		    uint64_t forget, int lockfd, struct row *r)
{
	uint64_t k;
	if (!bs_table_slot_valid(t, i, &k))
		return 0;
	struct bs_entry *e = &t->entries[i];
	uint64_t s = atomic_load(&e->state);
	if (!bs_state_failures(s) && !(s & BS_PROBATION))
		return 0;
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof ss);
	uint32_t len = bs_table_get_addr(t, i, &ss);
	if (!len || !addr_is_key((struct sockaddr *)&ss, len, k) ||
	    !bs_addr_format((struct sockaddr *)&ss, len, r->dest, sizeof r->dest))
		return 0;
	uint64_t next = bs_state_next_at(s), at = atomic_load(&e->attempt_at);
	uint64_t quiet = next > at ? next : at;
	r->key = k;
	r->failures = bs_state_failures(s);
	r->probation = (s & BS_PROBATION) != 0;
	r->last_err = bs_entry_last_err(e);
	r->idle = !r->probation && now > quiet && now - quiet > forget;
	r->next_in = r->probation || next <= now ? 0 : (double)(next - now) / 1e9;
	r->next_at = r->probation ? 0 : wall_of(next, now, wall);
	r->last_age = at && at <= now ? (double)(now - at) / 1e9 : -1;
	r->last_at = at && at <= now ? wall_of(at, now, wall) : 0;
	live_waiters(t, i, lockfd, r);
	r->attempts = atomic_load(&e->n_attempts);
	r->fails = atomic_load(&e->n_failures);
	r->waits = atomic_load(&e->n_waited);
	r->waited = atomic_load(&e->waited_ms) / 1e3;
	r->giveups = atomic_load(&e->n_giveups);
	return 1;
}

/* Most urgent first: waiters, then the soonest next attempt; idle last. */
static int by_urgency(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	if (x->idle != y->idle)
		return x->idle - y->idle;
	if (!x->procs != !y->procs)
		return y->procs ? 1 : -1;
	return x->next_in < y->next_in ? -1 : x->next_in > y->next_in;
}

static const char *err_name(int e)
{
	const char *n = e > 0 ? bs_errno_name(e) : NULL;
	return n ? n : "-";
}

/* The rows as a table, the first max of them (the most urgent) and a line
 * counting the rest. */
static void print_text(const struct row *r, unsigned n, unsigned max)
{
	if (!n) {
		puts("no destination is backing off");
		return;
	}
	printf("%-28s %8s %-13s %10s %7s %5s %10s %8s %8s %6s %9s %7s\n", "DESTINATION",
	       "FAILURES", "LAST ERROR", "NEXT IN", "THREADS", "PROCS", "LAST TRY", "ATTEMPTS",
	       "FAILED", "WAITS", "WAITED", "GAVE UP");
	for (unsigned i = 0; i < n && i < max; i++) {
		char next[32], age[32];
		snprintf(next, sizeof next, "%.1fs", r[i].next_in);
		snprintf(age, sizeof age, "%.1fs ago", r[i].last_age);
		printf("%-28s %8u %-13s %10s %7u %5u %10s %8u %8u %6u %8.1fs %7u\n", r[i].dest,
		       r[i].failures, err_name(r[i].last_err),
		       r[i].probation ? "probation" : r[i].idle ? "idle" : next, r[i].waiting,
		       r[i].procs, r[i].last_age < 0 ? "-" : age, r[i].attempts, r[i].fails,
		       r[i].waits, r[i].waited, r[i].giveups);
	}
	if (n > max)
		printf("... and %u more\n", n - max);
}

/* s as the inside of a JSON string, or of a Prometheus label value: a
 * backslash, a quote and a newline escaped; other control bytes and
 * non-ASCII as \u00XX (JSON) or '?' (a label). */
static void put_escaped(const char *s, int json)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '\\' || c == '"')
			printf("\\%c", c);
		else if (c == '\n')
			fputs("\\n", stdout);
		else if (c < 0x20 || c > 0x7e)
			json ? printf("\\u%04x", c) : putchar('?');
		else
			putchar(c);
	}
}

static void print_json(const struct row *r, unsigned n)
{
	putchar('[');
	for (unsigned i = 0; i < n; i++) {
		char age[32] = "null";
		if (r[i].last_age >= 0)
			snprintf(age, sizeof age, "%.3f", r[i].last_age);
		printf("%s\n  {\"destination\": \"", i ? "," : "");
		put_escaped(r[i].dest, 1);
		printf("\", \"failures\": %u, \"probation\": %s, \"idle\": %s, "
		       "\"last_error\": \"%s\", \"next_attempt_in\": %.3f, \"waiting_threads\": %u, "
		       "\"waiting_processes\": %u, \"last_attempt_age\": %s, \"attempts\": %u, "
		       "\"failed_attempts\": %u, \"waits\": %u, \"seconds_waited\": %.3f, "
		       "\"give_ups\": %u}",
		       r[i].failures, r[i].probation ? "true" : "false", r[i].idle ? "true" : "false",
		       err_name(r[i].last_err), r[i].next_in, r[i].waiting, r[i].procs, age,
		       r[i].attempts, r[i].fails, r[i].waits, r[i].waited, r[i].giveups);
	}
	puts(n ? "\n]" : "]");
}

static void metric(const char *name, const char *type, const char *help, const struct row *r,
		   unsigned n, size_t field, int is_double, const char *table, const char *user)
{
	printf("# HELP backoffshim_%s %s\n# TYPE backoffshim_%s %s\n", name, help, name, type);
	for (unsigned i = 0; i < n; i++) {
		const char *p = (const char *)&r[i] + field;
		if (r[i].idle)
			continue;
		if (is_double && *(const double *)(const void *)p == 0 && strstr(name, "timestamp"))
			continue; /* (none: on probation, never attempted) */
		printf("backoffshim_%s{destination=\"", name);
		put_escaped(r[i].dest, 0);
		printf("\",table=\"");
		put_escaped(table, 0);
		printf("\",user=\"");
		put_escaped(user, 0);
		if (is_double)
			printf("\"} %.3f\n", *(const double *)(const void *)p);
		else
			printf("\"} %u\n", *(const uint32_t *)(const void *)p);
	}
}

/* Absolute times, not gauges that change every second; idle destinations
 * are left out, so that many short-lived ones do not churn labels. */
static void print_prometheus(const struct row *r, unsigned n, const char *table, const char *user)
{
#define M(name, type, help, field, dbl) \
	metric(name, type, help, r, n, offsetof(struct row, field), dbl, table, user)
	M("consecutive_failures", "gauge", "Failures since the destination last worked.", failures, 0);
	M("next_attempt_timestamp_seconds", "gauge",
	  "When the next attempt may go out (Unix time).", next_at, 1);
	M("last_attempt_timestamp_seconds", "gauge", "When the last attempt started (Unix time).",
	  last_at, 1);
	M("waiting_threads", "gauge", "Threads of live processes waiting now.", waiting, 0);
	M("waiting_processes", "gauge", "Live processes with a thread waiting now.", procs, 0);
	M("attempts_total", "counter", "Attempts whose outcome was recorded.", attempts, 0);
	M("failures_total", "counter", "Failed attempts.", fails, 0);
	M("waits_total", "counter", "Waits between attempts.", waits, 0);
	M("waited_seconds_total", "counter", "Time spent waiting between attempts.", waited, 1);
	M("give_ups_total", "counter", "Connects that gave up.", giveups, 0);
#undef M
}

/* Slots whose key word is neither empty, free, reserved nor a key that
 * checks out. */
static unsigned damaged_slots(struct bs_table *t)
{
	unsigned n = 0;
	for (unsigned i = 0; i < BS_TABLE_SLOTS; i++) {
		uint64_t w = atomic_load(&t->keys[i]), k;
		n += w && w != BS_TABLE_FREE && !(w & BS_TABLE_RES) && !bs_table_slot_valid(t, i, &k);
	}
	return n;
}

/* Each table segment of this layout on the host: calls f with its id and
 * what IPC_STAT said. */
static void each_table(void (*f)(int id, const struct shmid_ds *ds, void *ctx), void *ctx)
{
	struct shm_info info;
	int max = shmctl(0, SHM_INFO, (struct shmid_ds *)(void *)&info);
	for (int idx = 0; idx <= max; idx++) {
		struct shmid_ds ds;
		int id = shmctl(idx, SHM_STAT, &ds);
		if (id < 0 || ds.shm_segsz != BS_SHTAB_SIZE)
			continue;
		void *m = shmat(id, NULL, SHM_RDONLY);
		if (m == (void *)-1)
			continue;
		struct bs_shtab_header h;
		memcpy(&h, m, sizeof h);
		shmdt(m);
		enum bs_shtab_verdict v = bs_shtab_check_header(&h);
		if (v == BS_SHTAB_OK || v == BS_SHTAB_NEW)
			f(id, &ds, ctx);
	}
}

static void name_other(int id, const struct shmid_ds *ds, void *ctx)
{
	(void)id, (void)ctx;
	if (ds->shm_perm.uid == geteuid())
		return;
	struct passwd *pw = getpwuid(ds->shm_perm.uid);
	if (pw)
		printf("a table of user %s: backoffshim status --user %s\n", pw->pw_name,
		       pw->pw_name);
	else
		printf("a table of uid %u\n", (unsigned)ds->shm_perm.uid);
}

struct gc {
	uid_t uid;
	unsigned removed;
};

static void remove_unused(int id, const struct shmid_ds *ds, void *ctx)
{
	struct gc *g = ctx;
	if ((g->uid && ds->shm_perm.uid != g->uid) || ds->shm_nattch)
		return;
	if (shmctl(id, IPC_RMID, NULL) == 0) {
		char path[128];
		if (bs_shtab_lock_path(path, sizeof path, LOCK_DIR, ds->shm_perm.__key))
			unlink(path);
		g->removed++;
	}
}

/* The table as it is now, in o's format (text: at most max_rows rows);
 * returns status's exit status. */
static int show(const struct opts *o, const struct where *w, unsigned max_rows)
{
	int absent, damaged;
	struct bs_table *t = attach_table(w, 0, 0, &absent, &damaged);
	if (!t && (!absent || o->table || o->user)) { /* a table named must exist */
		if (absent)
			fprintf(stderr, "backoffshim: no table %s%s%s: no process has failed a "
					"connect with it\n", w->name, o->user ? " of user " : "",
				o->user ? o->user : "");
		return damaged ? 3 : 1;
	}
	static struct row rows[BS_TABLE_SLOTS];
	unsigned n = 0;
	uint64_t now = bs_now();
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	double wall = (double)ts.tv_sec + ts.tv_nsec / 1e9;
	uint64_t forget = bs_policy_longest_wait(&w->cfg.policy);
	char lock[128];
	int lockfd = t && bs_shtab_lock_path(lock, sizeof lock, LOCK_DIR, w->key)
			     ? open(lock, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
			     : -1;
	for (unsigned i = 0; t && i < BS_TABLE_SLOTS; i++)
		n += read_row(t, i, now, wall, forget, lockfd, &rows[n]);
	if (lockfd >= 0)
		close(lockfd);
	qsort(rows, n, sizeof rows[0], by_urgency);
	char user[64];
	struct passwd *pw = getpwuid(w->owner);
	snprintf(user, sizeof user, "%s", pw ? pw->pw_name : "?");
	if (o->format == JSON)
		print_json(rows, n);
	else if (o->format == PROMETHEUS)
		print_prometheus(rows, n, w->name, user);
	else
		print_text(rows, n, max_rows);
	if (o->format == TEXT && geteuid() == 0 && !o->user && !o->table)
		each_table(name_other, NULL);
	unsigned bad = t ? damaged_slots(t) : 0;
	if (t)
		shmdt((char *)t - BS_SHTAB_OFFSET);
	if (bad)
		fprintf(stderr, "backoffshim: table %s is damaged: %u entries do not check out; "
				"backoffshim reset --all rebuilds it\n", w->name, bad);
	return bad ? 3 : 0;
}

/* --watch: a heading and the table every o->watch seconds, until SIGINT or
 * SIGTERM (exit 0). On a terminal, as watch(1): the screen cleared (no
 * colour) and the rows cut to fit it; otherwise the tables one after
 * another, a blank line between them. A table missing or damaged for a
 * while is said so, and the watch goes on. */
static int watch(const struct opts *o, const struct where *w)
{
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	sigprocmask(SIG_BLOCK, &stop, NULL); /* taken by sigtimedwait below */
	int tty = isatty(STDOUT_FILENO);
	char host[256] = "";
	gethostname(host, sizeof host - 1);
	struct timespec every = {(time_t)o->watch,
				 (long)((o->watch - (double)(time_t)o->watch) * 1e9)};
	for (unsigned long frame = 0;; frame++) {
		unsigned max_rows = UINT32_MAX;
		struct winsize ws;
		if (tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row)
			max_rows = ws.ws_row > 5 ? ws.ws_row - 4u : 1; /* heading, blank, titles, more */
		char when[64] = "";
		time_t now = time(NULL);
		struct tm tm;
		if (localtime_r(&now, &tm))
			strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
		if (tty)
			fputs("\033[H\033[2J", stdout); /* home, clear the screen */
		else if (frame)
			putchar('\n');
		printf("Every %gs: backoffshim status    %s: %s\n\n", o->watch, host, when);
		fflush(stdout);
		show(o, w, max_rows);
		if (fflush(stdout) == EOF || ferror(stdout))
			return 1; /* nowhere to write: stop */
		if (sigtimedwait(&stop, NULL, &every) > 0)
			return 0;
	}
}

int bs_cmd_status(int argc, char **argv)
{
	struct opts o = {TEXT, NULL, NULL, 0, 0, NULL, 0};
	int st = parse(argc, argv, "status", status_usage, &o);
	if (st >= 0)
		return st;
	if (o.gc) {
		struct gc g = {geteuid(), 0};
		each_table(remove_unused, &g);
		printf("removed %u table%s that no process had attached\n", g.removed,
		       g.removed == 1 ? "" : "s");
		return 0;
	}
	struct where w;
	if (locate(&o, &w))
		return 1;
	return o.watch ? watch(&o, &w) : show(&o, &w, UINT32_MAX);
}

/* --all: every slot that does not check out emptied, every tag rebuilt. */
static unsigned rebuild(struct bs_table *t)
{
	unsigned fixed = 0;
	for (unsigned i = 0; i < BS_TABLE_SLOTS; i++) {
		uint64_t w = atomic_load(&t->keys[i]), k;
		if (w && !bs_table_slot_valid(t, i, &k)) {
			atomic_store(&t->keys[i], 0);
			atomic_store(&t->meta[i], 0);
			for (unsigned c = 0; c < BS_TABLE_WAITER_PIDS; c++)
				atomic_store(&t->waiters[i][c], 0);
			fixed++;
		}
	}
	for (unsigned b = 0; b < BS_TABLE_BUCKETS; b++) {
		uint64_t tags = 0, k;
		for (unsigned w = 0; w < BS_TABLE_WAYS; w++)
			if (bs_table_slot_valid(t, b * BS_TABLE_WAYS + w, &k))
				tags |= bs_table_tag(k);
		atomic_store(&t->tags[b], tags);
	}
	return fixed;
}

/* A name lookup backing off (`resolve`), written as status shows it; 0 if
 * text is none the library keeps: it keeps no lookup of a node with a ':'
 * or of an IPv4 address (which always resolves). */
static uint64_t name_key_of(const char *text)
{
	char node[BS_NAME_TEXT];
	struct bs_name_addr a;
	struct in_addr ip;
	const char *colon = strrchr(text, ':');
	size_t n = colon ? (size_t)(colon - text) : strlen(text);
	if (!n || n >= sizeof node)
		return 0;
	memcpy(node, text, n);
	node[n] = '\0';
	if (strchr(node, ':') || inet_pton(AF_INET, node, &ip) == 1)
		return 0;
	socklen_t len = bs_name_addr(&a, node, colon ? colon + 1 : NULL);
	return len ? bs_name_key((struct sockaddr *)&a, len) : 0;
}

int bs_cmd_reset(int argc, char **argv)
{
	struct opts o = {TEXT, NULL, NULL, 0, 0, NULL, 0};
	int st = parse(argc, argv, "reset", reset_usage, &o);
	if (st >= 0)
		return st;
	struct bs_cli_dest d;
	uint64_t key = 0;
	int name = 0;
	if (o.dest) {
		if (!bs_cli_dest_parse(o.dest, &d) && !d.is_name)
			key = bs_addr_key((struct sockaddr *)&d.ss, d.len);
		else if ((key = name_key_of(o.dest)))
			name = 1; /* (each family's lookups too) */
		else
			return bs_cli_usage("reset", "'%s' is not ADDR:PORT, [V6]:PORT or NAME[:SERVICE]",
					    o.dest);
	}
	struct where w;
	int absent, damaged;
	if (locate(&o, &w))
		return 1;
	struct bs_table *t = attach_table(&w, 1, o.all, &absent, &damaged);
	if (!t) {
		if (absent)
			puts("nothing to reset: no process has used the shared table");
		return absent ? 0 : 1;
	}
	unsigned n = 0;
	uint64_t now = bs_now();
	for (unsigned i = 0; i < BS_TABLE_SLOTS; i++) {
		struct row r;
		if (!read_row(t, i, now, 0, UINT64_MAX, -1, &r) ||
		    (o.dest && r.key != key && !(name && bs_name_keys_match(r.key, key))))
			continue;
		bs_entry_reset(&t->entries[i]); /* and wake every waiter */
		syscall(SYS_futex, &t->entries[i].seq, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
		printf("reset %s (%u %s)\n", r.dest, r.failures, r.failures == 1 ? "failure" : "failures");
		n++;
	}
	unsigned fixed = o.all ? rebuild(t) : 0;
	if (fixed || damaged)
		printf("rebuilt the table: %u damaged entries emptied%s\n", fixed,
		       damaged ? ", header rewritten" : "");
	else if (!n)
		printf("nothing to reset: %s is not backing off\n", o.dest ? o.dest : "no destination");
	return 0;
}
