/* init: constructor, config loading and process-wide state. See shim.h. */
#include "log.h"
#include "policy.h"
#include "real.h"
#include "ret.h"
#include "role.h"
#include "sfilter.h"
#include "shared.h"
#include "shim.h"
#include "util.h"
#include "version.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

enum { ST_NONE, ST_BUSY, ST_READY, ST_OFF };

static _Atomic int g_state;
static struct bs_config g_cfg;
static struct bs_rules g_rules;
/* the version, for `backoffshim --version` to read from the file */
__attribute__((used)) static const char g_version[] = BS_VERSION_MARK BS_VERSION;

struct bs_fdtab bs_fdtab_g;
static struct bs_restab g_res;
static uint64_t g_seed;
static _Atomic uint64_t g_draws;

/* Config problems are counted at load and told in one line where the log
 * goes (init); `backoffshim check-config` lists them. */
static unsigned g_nproblems;
/* Why the log file could not be used: found only here, at load (a FIFO
 * without a reader, a planted link...), so the one line says it. */
static const char *g_log_problem;

static const char *get_env(void *ctx, const char *name)
{
	(void)ctx;
	return secure_getenv(name);
}

/* The config file (a bs_config_read_fn), by raw system calls: inside the
 * library, read() and close() are the shim's own wrappers. Opened without
 * blocking (a FIFO would wait for a writer) and read only if it is a
 * regular file; /dev/null (character device 1:3) is quietly empty. */
static long read_file(void *ctx, const char *path, char *buf, size_t cap, const char **why)
{
	(void)ctx;
	int fd = (int)BS_SYS(SYS_openat, AT_FDCWD, path,
			     O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		*why = bs_config_cannot("open file", -fd);
		return -1;
	}
	struct stat st;
	int known = BS_SYS(SYS_fstat, fd, &st) == 0;
	if (!known || !S_ISREG(st.st_mode)) {
		int null = known && S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 && minor(st.st_rdev) == 3;
		BS_SYS(SYS_close, fd);
		if (null)
			return 0;
		*why = "not a regular file";
		return -1;
	}
	size_t n = 0;
	long r = 0;
	while (n < cap && ((r = BS_SYS(SYS_read, fd, buf + n, cap - n)) > 0 || r == -EINTR))
		if (r > 0)
			n += (size_t)r;
	BS_SYS(SYS_close, fd);
	if (r < 0) {
		*why = bs_config_cannot("read file", (int)-r);
		return -1;
	}
	return (long)n;
}

static void report(void *ctx, const char *origin, unsigned line, const char *key,
		   const char *value, const char *why)
{
	(void)ctx, (void)origin, (void)line, (void)key, (void)value, (void)why;
	g_nproblems++;
}

/* The config file read: $BACKOFFSHIM_CONFIG, else the default one if it
 * exists; NULL for none. */
static const char *config_file(void)
{
	const char *cfg = get_env(NULL, "BACKOFFSHIM_CONFIG");
	if (!cfg || !*cfg)
		cfg = access(BS_DEFAULT_CONFIG, F_OK) == 0 ? BS_DEFAULT_CONFIG : NULL;
	return cfg;
}

/* The log file's directory is sticky and world-writable (like /tmp): anyone
 * may have planted a symbolic link there, so it is not followed. */
static int in_sticky_dir(const char *path)
{
	char dir[sizeof g_cfg.log_file];
	bs_path_dir(path, dir, sizeof dir);
	struct stat st;
	return stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX) &&
	       (st.st_mode & S_IWOTH);
}

/* The log file is opened for each line and closed after it: between lines
 * it holds no descriptor, so the program's fd numbers and its RLIMIT_NOFILE
 * budget stay its own, and a rotated file is followed. Each open is
 * non-blocking (a FIFO needs a reader already), close-on-exec, moved above
 * fd 2 (a program started with 0, 1 or 2 closed keeps them closed), and
 * kept only for a regular file, a character device or a FIFO. */
static int g_log_flags;

/* log_open_problem's answer for an open that failed otherwise: open_log
 * names the error (cannot_append), the per-line opener needs no words. */
static const char CANNOT_APPEND[] = "cannot open for appending";

/* raw: the log file's fd, or -errno of its open */
static const char *log_open_problem(int raw)
{
	struct stat st;
	if (raw < 0)
		return raw == -ENXIO ? "a FIFO with no reader (or a socket), logging to stderr"
		     : raw == -ELOOP && (g_log_flags & O_NOFOLLOW)
			 ? "a symbolic link in a world-writable sticky directory; "
			   "not followed, logging to stderr"
			 : CANNOT_APPEND;
	if (BS_SYS(SYS_fstat, raw, &st) != 0 ||
	    !(S_ISREG(st.st_mode) || S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)))
		return "not a regular file, character device or FIFO, logging to stderr";
	return NULL;
}

/* One open of the log file, for one line: an fd above 2, or -1. */
static int open_log_file(void *ctx)
{
	(void)ctx;
	int raw = (int)BS_SYS(SYS_openat, AT_FDCWD, g_cfg.log_file, g_log_flags, 0644);
	int fd = -1;
	if (!log_open_problem(raw))
		fd = raw > 2 ? raw : (int)BS_SYS(SYS_fcntl, raw, F_DUPFD_CLOEXEC, 3);
	if (raw >= 0 && raw != fd)
		BS_SYS(SYS_close, raw);
	return fd;
}

/* A regular file reached by an ordinary path is opened per line. A device
 * or FIFO (which do not rotate), and a path through /proc or /dev/fd (a
 * name for "whatever that fd is now", which may be the program's own file
 * by the next line), are opened once and held above fd 2. */
static int open_per_line(int fd, const char *path)
{
	struct stat st;
	return BS_SYS(SYS_fstat, fd, &st) == 0 && S_ISREG(st.st_mode) &&
	       strncmp(path, "/proc/", 6) != 0 && strncmp(path, "/dev/", 5) != 0;
}

/* lines go to a log file (not stderr): they get a time by default */
static int g_log_to_file;

/* A log file that cannot be used: its problem names where its name came
 * from (the variable, else the config file's [log] file). */
static void report_log_file(const char *path, const char *why)
{
	const char *var = secure_getenv("BACKOFFSHIM_LOG_FILE");
	const char *cfg = secure_getenv("BACKOFFSHIM_CONFIG");
	if (var && *var)
		report(NULL, "BACKOFFSHIM_LOG_FILE", 0, NULL, path, why);
	else
		report(NULL, cfg && *cfg ? cfg : BS_DEFAULT_CONFIG, 0, "[log] file", path, why);
}

static void open_log(void)
{
	const char *path = g_cfg.log_file;
	enum bs_level level = (enum bs_level)g_cfg.log_level;
	if (!path[0]) {
		bs_log_setup(level, -1);
		return;
	}
	g_log_flags = O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_NOCTTY |
		      (in_sticky_dir(g_cfg.log_file) ? O_NOFOLLOW : 0);
	int raw = (int)BS_SYS(SYS_openat, AT_FDCWD, g_cfg.log_file, g_log_flags, 0644);
	const char *why = log_open_problem(raw);
	int held = -1, err = -raw;
	if (!why && !open_per_line(raw, g_cfg.log_file)) {
		held = (int)BS_SYS(SYS_fcntl, raw, F_DUPFD_CLOEXEC, 3);
		if (held < 0)
			why = CANNOT_APPEND, err = -held;
	}
	if (raw >= 0)
		BS_SYS(SYS_close, raw);
	if (why == CANNOT_APPEND) {
		static char text[160];
		snprintf(text, sizeof text, "%s, logging to stderr",
			 bs_config_cannot("open for appending", err));
		why = text;
	}
	if (why) {
		g_log_problem = why;
		report_log_file(path, why);
		bs_log_setup(level, -1);
	} else if (held >= 0) {
		bs_log_setup(level, held);
		g_log_to_file = 1;
	} else {
		bs_log_setup_file(level, open_log_file, NULL);
		g_log_to_file = 1;
	}
}

/* The fd table: one slot per possible fd, sized from RLIMIT_NOFILE (hard
 * limit, capped), in untouched anonymous memory until used. */
/* One slot per descriptor number the program may reach (its hard
 * RLIMIT_NOFILE, at most 2^20): address space reserved, touched only where
 * used. Under an RLIMIT_AS, at most 1/64 of it, so that the program's own
 * allocations keep their room (numbers beyond the table pass through). */
static void setup_fds(void)
{
	struct rlimit rl;
	rlim_t n = 1u << 16;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		n = rl.rlim_max == RLIM_INFINITY ? (1u << 20) : rl.rlim_max;
	if (n > (1u << 20))
		n = 1u << 20;
	if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    n > rl.rlim_cur / 64 / sizeof(struct bs_fdslot))
		n = rl.rlim_cur / 64 / sizeof(struct bs_fdslot);
	void *m = mmap(NULL, (size_t)n * sizeof(struct bs_fdslot), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	bs_fdtab_init(&bs_fdtab_g, m == MAP_FAILED ? NULL : m, (unsigned)n);
}

/* How lines look: the program's name always; a time when asked, or by
 * default for a log file; JSON when asked; the journal's priority prefix
 * when stderr is the journal's stream. */
static void set_log_style(void)
{
	struct bs_log_style st = {
		.time = g_cfg.log_time < 0 ? g_log_to_file : g_cfg.log_time != 0,
		.json = g_cfg.log_json,
		.journal = !g_cfg.log_file[0] && bs_log_stderr_is_journal(get_env(NULL, "JOURNAL_STREAM")),
	};
	const char *name = program_invocation_short_name;
	if (name)
		strncpy(st.program, name, sizeof st.program - 1);
	bs_log_set_style(&st);
}

/* debug: one line at load, so that "is it loaded, and how?" has an answer */
static void log_loaded(void)
{
	const char *cfg = config_file();
	struct bs_line l;
	bs_line_start(&l);
	bs_line_event(&l, "load");
	bs_line_str(&l, "loaded libbackoffshim " BS_VERSION "; config ");
	bs_line_str(&l, cfg ? cfg : "built-in defaults");
	bs_line_str(&l, " and BACKOFFSHIM_* variables; policy ");
	bs_line_str(&l, bs_name_of(&bs_policy_names, g_cfg.policy.kind));
	bs_line_str(&l, "; nonblocking ");
	bs_line_str(&l, bs_name_of(&bs_nbmode_names, g_cfg.nonblocking));
	bs_line_str(&l, "; table ");
	bs_line_str(&l, g_cfg.shared);
	bs_line_emit(&l, BS_LOG_DEBUG);
}

/* A library loaded after the shim that defines connect() (a proxy's
 * wrapper, socket_wrapper; a sanitizer's runtime, which a program built
 * with it loads after any preload, only forwards it) sees the program's
 * connects but would not see the shim's retries, which go to the kernel:
 * they would reach the address the wrapper diverts. Then every connect
 * passes through, and the first one says why (bs_passing_through). */
static const char *_Atomic g_wrapped_by;

static int forwards_unchanged(const char *file)
{
	static const char *const sanitizers[] = {"libtsan.", "libasan.", "libmsan.", "liblsan.",
						 "libhwasan."};
	const char *base = file ? strrchr(file, '/') : NULL;
	base = base ? base + 1 : file ? file : "";
	for (size_t i = 0; i < sizeof sanitizers / sizeof *sanitizers; i++)
		if (!strncmp(base, sanitizers[i], strlen(sanitizers[i])))
			return 1;
	return 0;
}

static int connect_is_wrapped_after(void)
{
	Dl_info next, libc;
	void *fn = dlsym(RTLD_NEXT, "connect");
	if (!fn || !dladdr(fn, &next) || !dladdr((void *)gnu_get_libc_version, &libc) ||
	    next.dli_fbase == libc.dli_fbase || forwards_unchanged(next.dli_fname))
		return 0;
	atomic_store(&g_wrapped_by, next.dli_fname ? next.dli_fname : "a library");
	return 1;
}

void bs_passing_through(void)
{
	const char *by = atomic_load_explicit(&g_wrapped_by, memory_order_relaxed);
	if (!by || !(by = atomic_exchange(&g_wrapped_by, NULL)))
		return;
	struct bs_line l;
	bs_line_start(&l);
	bs_line_event(&l, "load");
	bs_line_str(&l, "connect() is wrapped by ");
	bs_line_str(&l, by);
	bs_line_str(&l, ", loaded after the shim, which would not see its retries: connects pass "
			"through (preload the shim after it)");
	bs_line_emit(&l, BS_LOG_INFO);
}

const struct bs_config *_Atomic bs_fresh_cfg_g;
long bs_errno_off_g;

/* Whether connect.c's fresh path may serve these settings: one policy for
 * every destination, which is neither off nor responsive, and no debug
 * lines (they tell of each connect). */
static int fresh_path_fits(void)
{
	return !g_cfg.disable && (!g_cfg.rules || !g_cfg.rules->n) &&
	       g_cfg.policy.kind != BS_POLICY_OFF && g_cfg.policy.kind != BS_POLICY_RESPONSIVE &&
	       !bs_log_enabled(BS_LOG_DEBUG);
}

__attribute__((constructor)) static void init(void)
{
	int expect = ST_NONE;
	if (!atomic_compare_exchange_strong(&g_state, &expect, ST_BUSY))
		return;
	int saved = errno;
	bs_real_resolve_all();
	const char *dis = get_env(NULL, "BACKOFFSHIM_DISABLE");
	int off = 0;
	const char *why;
	if (dis && bs_parse_bool(dis, &off, &why) == 0 && off) {
		atomic_store(&g_state, ST_OFF);
		errno = saved;
		return;
	}
	set_log_style(); /* the program's name, for the config's problems */
	bs_config_load_rules(&g_cfg, &g_rules, get_env, read_file, report, NULL);
	if (!getauxval(AT_SECURE)) /* (else no variable is read: secure_getenv) */
		bs_config_check_env_names(environ, report, NULL);
	open_log();
	set_log_style();
	if (g_nproblems)
		bs_config_tell_problems(g_nproblems, config_file(), g_log_problem);
	if (g_cfg.seed_set) {
		g_seed = g_cfg.seed;
	} else {
		uint64_t r[2] = {0, 0};
		const void *at = (const void *)getauxval(AT_RANDOM);
		if (at)
			memcpy(r, at, sizeof r);
		g_seed = r[0] ^ bs_mix64(r[1]); /* (the kernel's 16 random bytes per exec) */
	}
	if (!g_cfg.disable && connect_is_wrapped_after())
		g_cfg.disable = 1;
	setup_fds();
	bs_shared_setup(&g_cfg);
	if (!g_cfg.disable && bs_log_enabled(BS_LOG_DEBUG))
		log_loaded();
	bs_errno_off_g = (char *)&errno - (char *)__builtin_thread_pointer();
	/* Tell a supervisor (backoffshim run --engine seccomp, sfilter.h), if
	 * one watches this process, that the library retries its connects: the
	 * supervisor then passes them through, so no connect waits twice.
	 * Without one the kernel answers EINVAL at once; the answer changes
	 * nothing here. */
	if (!g_cfg.disable)
		syscall(SYS_prctl, BS_SUP_PRCTL_OPTION, 0, 0, 0, 0);
	atomic_store(&g_state, g_cfg.disable ? ST_OFF : ST_READY);
	errno = saved;
}

/* (connect.c's slow path) Until then every connect takes the slow path, so
 * none goes out before the table is known. */
void bs_first_connect(void)
{
	static _Atomic int done;
	if (atomic_load_explicit(&done, memory_order_acquire) || atomic_exchange(&done, 1))
		return;
	bs_shared_look();
	bs_role_first_connect();
	if (fresh_path_fits()) {
		atomic_store(&bs_fresh_cfg_g, &g_cfg);
		bs_fd_enable_fresh(&bs_fdtab_g);
	}
}

const struct bs_config *bs_active(void)
{
	int s = atomic_load_explicit(&g_state, memory_order_acquire);
	if (s == ST_READY)
		return &g_cfg;
	if (s == ST_NONE) {
		init(); /* a call before the constructor */
		if (atomic_load(&g_state) == ST_READY)
			return &g_cfg;
	}
	return NULL;
}

struct bs_restab *bs_res(void)
{
	return &g_res;
}

int bs_name_has(void *ctx, uint64_t name, uint64_t key)
{
	(void)ctx;
	return bs_res_name_has(bs_res(), name, key, bs_now(), BS_RES_HORIZON);
}

uint64_t bs_random(void)
{
	uint64_t k = atomic_fetch_add_explicit(&g_draws, 1, memory_order_relaxed);
	return bs_mix64(g_seed + k * BS_GOLDEN);
}

uint64_t bs_next_wait(const struct bs_config *cfg, struct bs_entry *e, uint64_t s)
{
	uint64_t prev = e ? atomic_load(&e->last_wait) : 0;
	return bs_policy_wait(&cfg->policy, bs_state_failures(s) + 1, prev,
			      bs_policy_unit(bs_random()));
}
