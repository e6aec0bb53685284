/*
 * correlate.c — the correlation handle: one state machine per APM process, the public API (correlate.h).
 *
 * A process goes NEW (an agent library mapping was reported) → TLS_PENDING (ELF resolved, /proc/PID/mem
 * open; waiting for the TLS descriptor to be relocated to the static resolver) → READY (samples can be
 * correlated), or FAILED (logged once, ignored until exec). A READY process then independently waits for its
 * process storage to be published, for its socket to be connectable, sends a registration, and flushes its
 * counts every flush interval (or 20 ms after a full queue). Everything that may be slow or retried happens
 * in correlate_tick(); correlate_on_sample() only reads the thread's TLS (and ptrace-stops a thread the
 * first time it is seen). Those reads are the reader's (apm_reader.c), which a READY process is registered
 * with, so that another thread may read samples' contexts first and hand them to correlate_on_read().
 *
 * A process whose address space vanished (a /proc/PID/mem read says so) is forgotten at the next tick, so a
 * missed exit or exec record leaks nothing. Logging: each problem kind is logged once per process (a bit in
 * logged). Not thread-safe.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "correlate/correlate_impl.h"
#include "src/base/clock.h"
#include "src/base/escape.h"

#define MS			1000000ull
#define ATTACH_RETRY_NS		(200 * MS)
#define RESOLVER_RETRY_NS	(2000 * MS)
#define STORAGE_POLL_MIN_NS	(200 * MS)
#define STORAGE_POLL_MAX_NS	(2000 * MS)
#define SOCKET_RETRY_NS		(1000 * MS)
#define UNRELOCATED_WARN_TRIES	50
#define MAX_PER_TICK		64	/* forgotten processes handled per tick */
#define LIB_PATH_MAX		512
/* Room for a process-supplied string escaped into a log line (escape.h cuts longer ones, marked "...") */
#define SHOWN_MAX		256

enum proc_state { PS_NEW, PS_TLS_PENDING, PS_READY, PS_FAILED };

/* Problems logged once per process. */
enum problem {
	PB_MAPS = 1u << 0,
	PB_ELF = 1u << 1,
	PB_MEM = 1u << 2,
	PB_RESOLVER = 1u << 3,
	PB_UNRELOCATED = 1u << 4,
	PB_STORAGE = 1u << 5,
	PB_THREAD = 1u << 6,
	PB_TLS_READ = 1u << 7,
	PB_PENDING_FULL = 1u << 8,
	PB_SEND = 1u << 9,
	PB_SOCK = 1u << 10,	/* + enum corr_sock_problem */
	PB_IMAGE = 1u << 20,	/* the image could not be checked, or it changed (exec) */
};

struct corr_proc {
	pid_t pid;
	enum proc_state state;
	int memfd;
	int is_our_child;	/* the caller is its parent: leave its exit status alone */
	char lib_path[LIB_PATH_MAX];
	uint64_t storage_addr, tlsdesc_addr;	/* runtime addresses in the process */
	uint64_t tls_offset;			/* from the thread pointer (negative on x86_64, as u64) */
	uint64_t last_resolver;
	enum corr_resolver last_kind;
	uint32_t resolver_tries;
	int storage_state;	/* 0 waiting for the pointer, 1 read, -1 garbage at bad_storage_ptr */
	uint64_t bad_storage_ptr;
	uint64_t storage_ptr;	/* where the storage in use was read */
	uint32_t storage_polls;
	struct corr_storage storage;
	struct corr_image image;	/* the exec it was attached in: every action is for this image only */
	struct corr_creds creds;	/* its credentials when the storage in use was read */
	struct corr_sock sock;	/* fd -1 when not connected */
	int registered;
	uint64_t next_attach_ns, next_storage_ns, next_sock_ns, retry_send_ns;
	struct corr_pending pending;
	uint32_t logged;
	int gone;		/* its address space vanished (exit or exec we were not told about) */
};

struct correlate {
	struct correlate_options opts;
	char *host_id;
	size_t host_id_len;
	struct hindex procs;	/* pid → struct corr_proc * */
	struct correlate_reader *reader;	/* TLS reads; READY processes are registered there */
	int reader_detaching;	/* this thread left threads seized (correlate_reader_poll()) */
	uint64_t next_flush_ns;
	struct correlate_stats stats;	/* counters only; gauges are computed in correlate_stats() */
	uint64_t hist[CORRELATE_LATENCY_BUCKETS];
	corr_stage_hook stage_hook;	/* tests only (corr_set_stage_hook()) */
	void *stage_arg;
};

__attribute__((format(printf, 5, 6)))
static void corr_log(struct correlate *c, struct corr_proc *p, uint32_t once, enum correlate_log_level level,
		     const char *fmt, ...)
{
	if (p && once) {
		if (p->logged & once)
			return;
		p->logged |= once;
	}
	if (!c->opts.log)
		return;
	char msg[1024];
	int n = p ? snprintf(msg, sizeof(msg), "apm: pid %d: ", (int)p->pid) : snprintf(msg, sizeof(msg), "apm: ");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
	va_end(ap);
	c->opts.log(c->opts.log_arg, level, msg);
}

static struct corr_proc *find_proc(const struct correlate *c, pid_t pid)
{
	uint64_t v;
	return hindex_u32_get(&c->procs, (uint32_t)pid, &v) ? (struct corr_proc *)(uintptr_t)v : NULL;
}

/* ---- binding to one image (apm_image.c); the test hook ---- */

void corr_set_stage_hook(struct correlate *c, corr_stage_hook fn, void *arg)
{
	c->stage_hook = fn;
	c->stage_arg = arg;
}

static void stage(struct correlate *c, const struct corr_proc *p, enum corr_stage st)
{
	if (c->stage_hook)
		c->stage_hook(c->stage_arg, p->pid, st);
}

/*
 * 1 if p still runs the image it was attached in (apm_image.c). Otherwise nothing more is done for it: it is
 * marked gone (forgotten at the end of the tick; a new image that maps an agent is attached afresh) and the
 * refusal is logged, doing saying what was not done.
 */
static int same_image(struct correlate *c, struct corr_proc *p, const char *doing)
{
	int r = corr_image_check(p->pid, &p->image);
	if (r == 0)
		return 1;
	p->gone = 1;
	if (r == -ESTALE)
		corr_log(c, p, PB_IMAGE, CORRELATE_LOG_INFO, "runs a new program (exec) since it was attached: "
			 "not %s, forgotten", doing);
	else if (r != -ESRCH)
		corr_log(c, p, PB_IMAGE, CORRELATE_LOG_WARN, "cannot check which program it runs (%s): not %s, "
			 "forgotten", strerror(-r), doing);
	return 0;
}

/* ---- lifecycle ---- */

int correlate_new(const struct correlate_options *opts, struct correlate **out)
{
	struct correlate_options o = opts ? *opts : (struct correlate_options){ 0 };
	size_t hlen = o.host_id ? strlen(o.host_id) : 0;
	if (hlen > CORRELATE_HOST_ID_MAX || o.flush_interval_ms > 60000 || o.delay_ms > 3600000)
		return -EINVAL;
	o.flush_interval_ms = o.flush_interval_ms ? o.flush_interval_ms : CORRELATE_DEFAULT_FLUSH_MS;
	/* Sampler lag + one flush interval + the agent's poll, with margin: see correlate.h. */
	o.delay_ms = o.delay_ms ? o.delay_ms : 2 * o.flush_interval_ms + 100;
	o.max_pending = o.max_pending ? o.max_pending : CORRELATE_DEFAULT_MAX_PENDING;
	struct correlate *c = calloc(1, sizeof(*c));
	int err = c && (c->host_id = strndup(o.host_id ? o.host_id : "", hlen)) ? corr_reader_new(&c->reader) : -ENOMEM;
	if (err < 0) {
		if (c)
			free(c->host_id);
		free(c);
		return err;
	}
	c->host_id_len = hlen;
	o.host_id = c->host_id;
	c->opts = o;
	*out = c;
	return 0;
}

static void proc_free(struct correlate *c, struct corr_proc *p)
{
	uint64_t dropped = corr_pending_clear(&p->pending);
	c->stats.counts_dropped += dropped;
	if (dropped)
		corr_log(c, p, 0, CORRELATE_LOG_INFO, "%" PRIu64 " counts dropped unsent", dropped);
	corr_pending_free(&p->pending);
	if (p->state == PS_READY)
		corr_reader_remove(c->reader, p->pid);
	if (p->memfd >= 0)
		close(p->memfd);
	if (p->sock.fd >= 0)
		close(p->sock.fd);
	free(p);
}

static void forget_proc(struct correlate *c, pid_t pid)
{
	struct corr_proc *p = find_proc(c, pid);
	if (!p)
		return;
	hindex_u32_del(&c->procs, (uint32_t)pid);
	proc_free(c, p);
}

void correlate_free(struct correlate *c)
{
	if (!c)
		return;
	uint64_t v;
	for (uint32_t pos = 0; hindex_next(&c->procs, &pos, &v);)
		proc_free(c, (struct corr_proc *)(uintptr_t)v);
	hindex_free(&c->procs);
	/* Seized threads get a last chance to be detached; if hostprof exits, the kernel does it. */
	corr_reader_free(c->reader);
	free(c->host_id);
	free(c);
}

int correlate_is_apm_library(const char *path)
{
	static const char prefix[] = "elastic-jvmti-linux-", deleted[] = " (deleted)";
	if (!path)
		return 0;
	const char *base = strrchr(path, '/');
	if (!base)
		return 0;
	base++;
	size_t len = strlen(base);
	if (len >= sizeof(deleted) - 1 && strcmp(base + len - (sizeof(deleted) - 1), deleted) == 0)
		len -= sizeof(deleted) - 1;
	if (len < sizeof(prefix) - 1 + 3 || strncmp(base, prefix, sizeof(prefix) - 1) != 0 ||
	    strncmp(base + len - 3, ".so", 3) != 0)
		return 0;
	/* The regex's ([\w-]*): letters, digits, '_' and '-'. */
	for (size_t i = sizeof(prefix) - 1; i < len - 3; i++) {
		char ch = base[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		      ch == '_' || ch == '-'))
			return 0;
	}
	return 1;
}

int correlate_on_mapping(struct correlate *c, pid_t pid, uint64_t start, uint64_t end, uint64_t pgoff,
			 const char *path)
{
	(void)pgoff;
	if (!c || pid <= 0 || !path || end <= start)
		return -EINVAL;
	if (find_proc(c, pid))
		return 1;
	if (!correlate_is_apm_library(path))
		return 0;
	struct corr_proc *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->pid = pid;
	p->memfd = -1;
	p->sock.fd = -1;
	p->pending.max = c->opts.max_pending;
	snprintf(p->lib_path, sizeof(p->lib_path), "%s", path);
	int err = hindex_u32_put(&c->procs, (uint32_t)pid, (uint64_t)(uintptr_t)p);
	if (err) {
		free(p);
		return err;
	}
	char shown[SHOWN_MAX];
	corr_log(c, p, 0, CORRELATE_LOG_DEBUG, "maps APM agent library %s", escape_str(shown, sizeof(shown), p->lib_path));
	return 1;
}

void correlate_on_thread_exit(struct correlate *c, pid_t pid, pid_t tid)
{
	if (c && find_proc(c, pid))
		corr_reader_forget_thread(c->reader, pid, tid);
}

void correlate_on_exec(struct correlate *c, pid_t pid)
{
	if (c)
		forget_proc(c, pid);
}

static void flush_proc(struct correlate *c, struct corr_proc *p, uint64_t now, int exited);

void correlate_on_process_exit(struct correlate *c, pid_t pid)
{
	struct corr_proc *p = c ? find_proc(c, pid) : NULL;
	if (!p)
		return;
	/* The agent may still drain its socket (it is closed only when the last reference goes). */
	if (p->sock.fd >= 0 && p->registered)
		flush_proc(c, p, clock_mono_ns(), 1);
	forget_proc(c, pid);
}

/* ---- attaching ---- */

struct find_lib_arg {
	struct corr_map map;
	char path[LIB_PATH_MAX];
};

static int find_agent_mapping(void *arg, const struct corr_map *m)
{
	struct find_lib_arg *a = arg;
	if (!correlate_is_apm_library(m->path))
		return 0;
	a->map = *m;
	snprintf(a->path, sizeof(a->path), "%s", m->path);
	a->map.path = a->path;
	return 1;
}

static int parent_is_us(pid_t pid)
{
	char name[64], buf[512];
	snprintf(name, sizeof(name), "/proc/%d/stat", (int)pid);
	int fd = open(name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	const char *rp = strrchr(buf, ')');	/* comm may contain spaces and parentheses */
	int ppid = 0;
	return rp && sscanf(rp + 1, " %*c %d", &ppid) == 1 && ppid == (int)getpid();
}

/*
 * The process's memory, for the image captured in p->image: checked again once the descriptor is open, so the
 * descriptor belongs to that image (apm_image.c). 0, or -1 (p failed or gone).
 */
static int open_memory(struct correlate *c, struct corr_proc *p)
{
	char name[64];
	snprintf(name, sizeof(name), "/proc/%d/mem", (int)p->pid);
	p->memfd = open(name, O_RDONLY | O_CLOEXEC);
	if (p->memfd < 0) {
		corr_log(c, p, PB_MEM, CORRELATE_LOG_WARN, "cannot open %s (%s)", name, strerror(errno));
		p->state = PS_FAILED;
		return -1;
	}
	return same_image(c, p, "attaching") ? 0 : -1;
}

/* NEW → TLS_PENDING: resolve the agent library's ELF and open the process's memory. */
static void attach_elf(struct correlate *c, struct corr_proc *p)
{
	struct find_lib_arg a;
	char why[256];
	int r = corr_image_capture(p->pid, &p->image);
	if (r < 0) {
		p->gone = r == -ESRCH;
		corr_log(c, p, PB_IMAGE, CORRELATE_LOG_WARN, "cannot read its auxiliary vector (%s)", strerror(-r));
		p->state = PS_FAILED;
		return;
	}
	r = corr_maps_each(p->pid, find_agent_mapping, &a);
	if (r != 1) {
		corr_log(c, p, PB_MAPS, CORRELATE_LOG_DEBUG, "agent library no longer mapped (%s)",
			 r < 0 ? strerror(-r) : "not in maps");
		p->state = PS_FAILED;
		return;
	}
	int fd = corr_open_mapped_file(p->pid, &a.map);
	struct corr_agent_elf elf;
	uint64_t bias = 0;
	if (fd < 0) {
		snprintf(why, sizeof(why), "cannot open it (%s)", strerror(-fd));
		r = fd;
	} else if ((r = corr_agent_elf_resolve(fd, &elf, why, sizeof(why))) == 0 &&
		   (r = corr_elf_load_bias(fd, &a.map, &bias)) < 0) {
		snprintf(why, sizeof(why), "mapping at offset %#" PRIx64 " is in no PT_LOAD", a.map.pgoff);
	}
	if (fd >= 0)
		close(fd);
	if (r < 0) {
		char shown[SHOWN_MAX];
		corr_log(c, p, PB_ELF, CORRELATE_LOG_WARN, "APM agent library %s unusable: %s",
			 escape_str(shown, sizeof(shown), a.path), why);
		p->state = PS_FAILED;
		return;
	}
	if (open_memory(c, p) < 0)
		return;
	p->storage_addr = elf.storage_va + bias;
	p->tlsdesc_addr = elf.tlsdesc_va + bias;
	p->is_our_child = parent_is_us(p->pid);
	p->state = PS_TLS_PENDING;
}

/* → READY: samples' TLS can be read (by the reader, from any thread), and the caller is told. */
static void become_ready(struct correlate *c, struct corr_proc *p, uint64_t tls_offset, const char *why)
{
	p->tls_offset = tls_offset;
	int r = corr_reader_add(c->reader, p->pid, p->memfd, p->tls_offset, p->is_our_child);
	if (r < 0) {
		corr_log(c, p, PB_MEM, CORRELATE_LOG_ERROR, "cannot register for TLS reads: %s", strerror(-r));
		p->state = PS_FAILED;
		return;
	}
	p->state = PS_READY;
	corr_log(c, p, 0, CORRELATE_LOG_DEBUG, "attached: TLS offset %" PRId64 ", %s", (int64_t)p->tls_offset, why);
	if (c->opts.ready)
		c->opts.ready(c->opts.ready_arg, p->pid);
}

/* TLS_PENDING → READY once the descriptor's resolver is the static one. */
static void attach_tls(struct correlate *c, struct corr_proc *p, uint64_t now)
{
	uint64_t desc[2];
	char why[512];
	int r = corr_mem_read(p->memfd, p->tlsdesc_addr, desc, sizeof(desc));
	if (r == -ESRCH) {
		p->gone = 1;
		return;
	}
	if (r < 0) {
		corr_log(c, p, PB_MEM, CORRELATE_LOG_WARN, "cannot read the TLS descriptor at %#" PRIx64 " (%s)",
			 p->tlsdesc_addr, strerror(-r));
		p->state = PS_FAILED;
		return;
	}
	/* Classifying reads /proc/PID/maps and an ELF file: only when the resolver changed. */
	if (desc[0] != p->last_resolver || p->resolver_tries == 0) {
		p->last_kind = corr_classify_resolver(p->pid, p->memfd, desc[0], why, sizeof(why));
		p->last_resolver = desc[0];
	} else {
		snprintf(why, sizeof(why), "TLS descriptor resolver %#" PRIx64 " unchanged", desc[0]);
	}
	p->resolver_tries++;
	switch (p->last_kind) {
	case CORR_RESOLVER_STATIC:
		become_ready(c, p, desc[1], why);
		return;
	case CORR_RESOLVER_UNRELOCATED:
		if (p->resolver_tries >= UNRELOCATED_WARN_TRIES)
			corr_log(c, p, PB_UNRELOCATED, CORRELATE_LOG_WARN, "%s; still retrying", why);
		p->next_attach_ns = now + (p->resolver_tries >= UNRELOCATED_WARN_TRIES ? RESOLVER_RETRY_NS
											: ATTACH_RETRY_NS);
		return;
	default:
		/* Dynamic TLS has no fixed offset from the thread pointer. Old glibc resolves lazily, so the
		 * descriptor may still change: look again now and then. */
		corr_log(c, p, PB_RESOLVER, CORRELATE_LOG_WARN,
			 "%s: cannot locate the thread-local variable, samples of this process are not correlated",
			 why);
		p->next_attach_ns = now + RESOLVER_RETRY_NS;
		return;
	}
}

static uint64_t storage_poll_interval(uint32_t polls)
{
	uint64_t ns = STORAGE_POLL_MIN_NS << (polls < 8 ? polls : 8);
	return ns < STORAGE_POLL_MAX_NS ? ns : STORAGE_POLL_MAX_NS;
}

/*
 * The storage at ptr and the credentials of the image that published it: read before and after the storage
 * (they must agree), the image checked after the second read (apm_image.c). 0, -ESRCH (gone, or exec'd:
 * p->gone), -EAGAIN (the credentials changed meanwhile: read again later), or corr_storage_read()'s error.
 */
static int read_bound_storage(struct correlate *c, struct corr_proc *p, uint64_t ptr, struct corr_storage *st,
			      struct corr_creds *creds, char *why, size_t whylen)
{
	struct corr_creds after;
	int r = corr_proc_creds(p->pid, creds);
	if (r == 0)
		r = corr_storage_read(p->memfd, ptr, st, why, whylen);
	stage(c, p, CORR_STAGE_STORAGE_READ);
	if (r == 0 && (r = corr_proc_creds(p->pid, &after)) == 0 && !same_image(c, p, "reading its storage"))
		r = -ESRCH;
	if (r == -ENOENT)
		r = -ESRCH;	/* no credentials: not a live process */
	if (r == 0 && !corr_creds_equal(creds, &after))
		r = -EAGAIN;
	return r;
}

/* Process storage: only once the agent has published a non-zero pointer (it may do so late). */
static void read_storage(struct correlate *c, struct corr_proc *p, uint64_t now)
{
	uint64_t ptr = 0;
	char why[256];
	struct corr_storage st;
	struct corr_creds creds;
	int r = corr_mem_read(p->memfd, p->storage_addr, &ptr, sizeof(ptr));
	p->next_storage_ns = now + storage_poll_interval(p->storage_polls++);
	p->gone = r == -ESRCH;
	if (r < 0 || ptr == 0 || (p->storage_state < 0 && ptr == p->bad_storage_ptr))
		return;
	r = read_bound_storage(c, p, ptr, &st, &creds, why, sizeof(why));
	if (r == -ESRCH || r == -EAGAIN) {
		p->gone |= r == -ESRCH;
		return;
	}
	if (r < 0) {
		corr_log(c, p, PB_STORAGE, CORRELATE_LOG_WARN, "%s: process ignored", why);
		p->storage_state = -1;
		p->bad_storage_ptr = ptr;
		return;
	}
	p->storage = st;
	p->creds = creds;
	p->storage_state = 1;
	p->storage_ptr = ptr;
	p->next_storage_ns = now + STORAGE_POLL_MAX_NS;
	char service[SHOWN_MAX], env[SHOWN_MAX], sock[SHOWN_MAX];
	corr_log(c, p, 0, CORRELATE_LOG_INFO, "APM agent: service '%s', environment '%s', socket '%s'",
		 escape_str(service, sizeof(service), p->storage.service),
		 escape_str(env, sizeof(env), p->storage.env), escape_str(sock, sizeof(sock), p->storage.socket_path));
}

/* Before a reconnection: an agent that restarted inside the process may have published a new storage. */
static void refresh_storage(struct correlate *c, struct corr_proc *p)
{
	uint64_t ptr = 0;
	struct corr_storage st;
	struct corr_creds creds;
	char why[256];
	if (corr_mem_read(p->memfd, p->storage_addr, &ptr, sizeof(ptr)) == 0 && ptr && ptr != p->storage_ptr &&
	    read_bound_storage(c, p, ptr, &st, &creds, why, sizeof(why)) == 0) {
		p->storage = st;
		p->creds = creds;
		p->storage_ptr = ptr;
	}
}

static void open_socket(struct correlate *c, struct corr_proc *p, uint64_t now)
{
	char why[512];
	if (p->sock.ino)
		refresh_storage(c, p);
	/* As late as possible: the image checked right before the connect and again right after it. */
	stage(c, p, CORR_STAGE_CONNECT);
	if (p->gone || !same_image(c, p, "connecting"))
		return;
	enum corr_sock_problem pb = corr_socket_open(p->pid, p->storage.socket_path, &p->creds, &p->sock, why,
						     sizeof(why));
	if (pb == CORR_SOCK_OK && !same_image(c, p, "registering")) {
		close(p->sock.fd);
		p->sock.fd = -1;
		return;
	}
	if (pb != CORR_SOCK_OK) {
		p->sock.fd = -1;
		p->next_sock_ns = now + SOCKET_RETRY_NS;
		p->gone = pb == CORR_SOCK_PROC && kill(p->pid, 0) < 0 && errno == ESRCH;
		if (pb != CORR_SOCK_PROC)
			corr_log(c, p, PB_SOCK << pb, CORRELATE_LOG_WARN, "refusing socket: %s", why);
		return;
	}
	p->registered = 0;
	char shown[SHOWN_MAX];
	corr_log(c, p, 0, CORRELATE_LOG_DEBUG, "connected to '%s' (inode %" PRIu64 ")",
		 escape_str(shown, sizeof(shown), p->storage.socket_path), p->sock.ino);
}

/* The agent's socket is gone (it restarted or exited): reconnect, which re-registers. */
static void drop_socket(struct correlate *c, struct corr_proc *p, int err, uint64_t now)
{
	char shown[SHOWN_MAX];
	corr_log(c, p, 0, CORRELATE_LOG_DEBUG, "send to '%s' failed (%s): reconnecting",
		 escape_str(shown, sizeof(shown), p->storage.socket_path), strerror(-err));
	c->stats.send_errors++;
	close(p->sock.fd);
	p->sock.fd = -1;
	p->registered = 0;
	p->retry_send_ns = 0;
	p->next_sock_ns = now;
}

static void send_registration(struct correlate *c, struct corr_proc *p, uint64_t now)
{
	uint8_t msg[CORR_DATAGRAM_MAX];
	ssize_t len = corr_encode_registration(msg, sizeof(msg), c->opts.delay_ms, c->host_id, c->host_id_len);
	stage(c, p, CORR_STAGE_SEND);
	if (!same_image(c, p, "registering"))
		return;
	int err = len < 0 ? (int)len : corr_socket_send(&p->sock, msg, (size_t)len);
	if (err == 0) {
		p->registered = 1;
		p->retry_send_ns = 0;
		c->stats.registrations++;
		corr_log(c, p, 0, CORRELATE_LOG_DEBUG, "registered (samples-delay-ms %u)", c->opts.delay_ms);
	} else if (err == -EAGAIN) {
		c->stats.eagain_retries++;
		p->retry_send_ns = now + CORR_RECEIVER_POLL_MS * MS;
	} else {
		drop_socket(c, p, err, now);
	}
}

/*
 * Send p's pending counts. exited: p's exit was reported, so it cannot exec any more and its image is not
 * checked (its address space is gone; the socket was checked against the credentials of the image that
 * published it).
 */
static void flush_proc(struct correlate *c, struct corr_proc *p, uint64_t now, int exited)
{
	stage(c, p, CORR_STAGE_SEND);
	if (!exited && !same_image(c, p, "sending counts"))
		return;
	struct corr_flush_result res;
	int err = corr_pending_flush(&p->pending, corr_socket_send, &p->sock, now, c->hist, &res);
	c->stats.messages_sent += res.messages;
	c->stats.counts_sent += res.counts;
	p->retry_send_ns = 0;
	if (err == -EAGAIN) {
		/* The receiver drains its queue every 20 ms: retry then, not a whole flush interval later. */
		c->stats.eagain_retries++;
		p->retry_send_ns = now + CORR_RECEIVER_POLL_MS * MS;
	} else if (err) {
		drop_socket(c, p, err, now);
	}
}

/* A process that exits or execs quietly (no samples, nothing to send) must still be noticed, at low cost. */
static void check_alive(struct correlate *c, struct corr_proc *p, uint64_t now)
{
	same_image(c, p, "watching it");
	p->next_storage_ns = now + STORAGE_POLL_MAX_NS;
}

static void tick_proc(struct correlate *c, struct corr_proc *p, uint64_t now, int flush_due)
{
	if (p->state == PS_NEW)
		attach_elf(c, p);
	if (p->state == PS_TLS_PENDING && now >= p->next_attach_ns)
		attach_tls(c, p, now);
	if (p->state != PS_READY)
		return;
	if (p->storage_state != 1 && now >= p->next_storage_ns)
		read_storage(c, p, now);
	else if (p->storage_state == 1 && now >= p->next_storage_ns)
		check_alive(c, p, now);
	if (p->gone)
		return;
	if (p->storage_state == 1 && p->sock.fd < 0 && now >= p->next_sock_ns)
		open_socket(c, p, now);
	if (p->sock.fd < 0)
		return;
	int retry_due = p->retry_send_ns && now >= p->retry_send_ns;
	if (!p->registered && (retry_due || !p->retry_send_ns))
		send_registration(c, p, now);
	if (p->registered && p->pending.n && (flush_due || retry_due))
		flush_proc(c, p, now, 0);
}

/* The earliest time anything of p is due, or UINT64_MAX. */
static uint64_t proc_deadline(const struct corr_proc *p)
{
	uint64_t d = UINT64_MAX;
	if (p->state == PS_NEW)
		return 0;
	if (p->state == PS_TLS_PENDING)
		return p->next_attach_ns;
	if (p->state != PS_READY)
		return d;
	d = p->next_storage_ns;
	if (p->storage_state == 1 && p->sock.fd < 0 && p->next_sock_ns < d)
		d = p->next_sock_ns;
	if (p->sock.fd >= 0 && p->retry_send_ns && p->retry_send_ns < d)
		d = p->retry_send_ns;
	return d;
}

int correlate_tick(struct correlate *c, uint64_t now_ns)
{
	if (!c)
		return -EINVAL;
	uint64_t now = now_ns ? now_ns : clock_mono_ns();
	uint64_t interval = (uint64_t)c->opts.flush_interval_ms * MS;
	int flush_due = now >= c->next_flush_ns;
	if (flush_due)
		c->next_flush_ns = now + interval;
	/* Nothing to flush or attach without APM processes: the caller may sleep long. */
	uint64_t next = hindex_count(&c->procs) ? c->next_flush_ns : now + (uint64_t)CORRELATE_IDLE_MS * MS;
	pid_t gone[MAX_PER_TICK];
	unsigned ngone = 0;
	uint64_t v;
	for (uint32_t pos = 0; hindex_next(&c->procs, &pos, &v);) {
		struct corr_proc *p = (struct corr_proc *)(uintptr_t)v;
		tick_proc(c, p, now, flush_due);
		uint64_t d = proc_deadline(p);
		if (d < next)
			next = d;
		if (p->gone && ngone < MAX_PER_TICK)
			gone[ngone++] = p->pid;
	}
	/* Exits and execs the caller missed: the state is stale. */
	for (unsigned i = 0; i < ngone; i++)
		forget_proc(c, gone[i]);
	if (c->reader_detaching && (c->reader_detaching = correlate_reader_poll(c->reader)) &&
	    now + CORR_RECEIVER_POLL_MS * MS < next)
		next = now + CORR_RECEIVER_POLL_MS * MS;
	return next <= now ? 0 : (int)((next - now + MS - 1) / MS);
}

/* ---- per sample ---- */

static void fill_context(const struct corr_proc *p, const struct correlate_read *rd, struct correlate_context *out)
{
	memcpy(out->trace_id, rd->trace_id, CORRELATE_TRACE_ID_LEN);
	memcpy(out->transaction_id, rd->transaction_id, CORRELATE_TRANSACTION_ID_LEN);
	memcpy(out->span_id, rd->span_id, CORRELATE_TRANSACTION_ID_LEN);
	out->trace_flags = rd->trace_flags;
	int have = p->storage_state == 1;
	memcpy(out->service_name, have ? p->storage.service : "", have ? sizeof(out->service_name) : 1);
	memcpy(out->service_env, have ? p->storage.env : "", have ? sizeof(out->service_env) : 1);
}

static void count_sample(struct correlate *c, struct corr_proc *p, const struct correlate_read *rd,
			 const uint8_t *stack_id, uint64_t sample_ns)
{
	if (p->sock.fd < 0) {
		c->stats.samples_unsendable++;
		return;
	}
	struct corr_key k;
	memcpy(k.trace_id, rd->trace_id, sizeof(k.trace_id));
	memcpy(k.transaction_id, rd->transaction_id, sizeof(k.transaction_id));
	memcpy(k.stack_id, stack_id, sizeof(k.stack_id));
	int r = corr_pending_add(&p->pending, &k, sample_ns);
	if (r < 0) {
		c->stats.counts_dropped++;
		corr_log(c, p, PB_PENDING_FULL, CORRELATE_LOG_WARN,
			 "%s: counts dropped (the agent does not drain its socket fast enough)",
			 r == -ENOSPC ? "too many unsent keys" : "out of memory");
	}
}

/* What a read says about the thread and the process, logged once per process. */
static void note_read(struct correlate *c, struct corr_proc *p, pid_t tid, const struct correlate_read *rd)
{
	if (rd->traced > 0)
		c->stats.threads_traced++;
	if (rd->traced < 0) {
		c->stats.thread_trace_failures++;
		corr_log(c, p, PB_THREAD, CORRELATE_LOG_WARN,
			 "thread %d cannot be traced to read its thread pointer (%s): its samples are not correlated",
			 (int)tid, strerror(rd->err));
	}
	if (rd->status == CORRELATE_READ_GONE)
		p->gone = 1;
	if (rd->status == CORRELATE_READ_FAILED)
		corr_log(c, p, PB_TLS_READ, CORRELATE_LOG_WARN,
			 "thread %d: cannot read its correlation block (TLS at %#" PRIx64 ", block at %#" PRIx64
			 "): %s", (int)tid, rd->tls_addr, rd->block_addr, strerror(rd->err));
	/* A stop that timed out is finished by the thread that read: this one, for correlate_on_sample(). */
	if (rd->status == CORRELATE_READ_NO_THREAD && !rd->traced)
		c->reader_detaching = 1;
}

int correlate_on_read(struct correlate *c, pid_t pid, pid_t tid, const struct correlate_read *rd,
		      const uint8_t stack_trace_id[CORRELATE_STACK_ID_LEN], uint64_t sample_time_ns,
		      struct correlate_context *out)
{
	if (!c || !rd || !stack_trace_id || tid <= 0)
		return -EINVAL;
	struct corr_proc *p = find_proc(c, pid);
	if (!p)
		return 0;
	c->stats.samples++;
	note_read(c, p, tid, rd);
	if (p->state != PS_READY || rd->status != CORRELATE_READ_ACTIVE)
		return 0;
	c->stats.samples_correlated++;
	if (out)
		fill_context(p, rd, out);
	count_sample(c, p, rd, stack_trace_id, sample_time_ns ? sample_time_ns : clock_mono_ns());
	return 1;
}

int correlate_on_sample(struct correlate *c, pid_t pid, pid_t tid,
			const uint8_t stack_trace_id[CORRELATE_STACK_ID_LEN], uint64_t sample_time_ns,
			struct correlate_context *out)
{
	if (!c || !stack_trace_id || tid <= 0)
		return -EINVAL;
	struct corr_proc *p = find_proc(c, pid);
	if (!p)
		return 0;
	struct correlate_read rd;
	if (p->state == PS_READY)
		correlate_reader_read(c->reader, pid, tid, &rd);
	else
		rd = (struct correlate_read){ .status = CORRELATE_READ_NOT_APM };
	return correlate_on_read(c, pid, tid, &rd, stack_trace_id, sample_time_ns, out);
}

int correlate_is_ready(const struct correlate *c, pid_t pid)
{
	const struct corr_proc *p = c && hindex_count(&c->procs) ? find_proc(c, pid) : NULL;
	return p && p->state == PS_READY;
}

struct correlate_reader *correlate_get_reader(struct correlate *c)
{
	return c ? c->reader : NULL;
}

uint32_t correlate_delay_ms(const struct correlate *c)
{
	return c ? c->opts.delay_ms : 0;
}

/* ---- the end of a run ---- */

/* One round for p: connect, register, send what is pending. 1 while it has counts that may still go. */
static int finish_proc(struct correlate *c, struct corr_proc *p, uint64_t now)
{
	if (p->state != PS_READY || p->gone || !p->pending.n)
		return 0;
	if (p->sock.fd < 0 && p->storage_state == 1)
		open_socket(c, p, now);
	if (p->sock.fd < 0)
		return 0;
	if (!p->registered)
		send_registration(c, p, now);
	if (p->registered)
		flush_proc(c, p, now, 0);
	/* flush_proc() leaves a retry time after a full queue; a lost socket is not reopened at the end. */
	return p->sock.fd >= 0 && p->pending.n;
}

uint64_t correlate_finish(struct correlate *c, uint32_t budget_ms)
{
	if (!c)
		return 0;
	uint64_t end = clock_mono_ns() + (uint64_t)budget_ms * MS, unsent = 0, v;
	const struct timespec pause = { 0, CORR_RECEIVER_POLL_MS * MS };
	for (int more = 1; more;) {
		more = 0;
		for (uint32_t pos = 0; hindex_next(&c->procs, &pos, &v);)
			more |= finish_proc(c, (struct corr_proc *)(uintptr_t)v, clock_mono_ns());
		if (more && clock_mono_ns() + CORR_RECEIVER_POLL_MS * MS > end)
			break;
		if (more)
			nanosleep(&pause, NULL); /* the agents drain their sockets every 20 ms */
	}
	for (uint32_t pos = 0; hindex_next(&c->procs, &pos, &v);) {
		struct corr_proc *p = (struct corr_proc *)(uintptr_t)v;
		uint64_t left = corr_pending_clear(&p->pending);
		if (left)
			corr_log(c, p, 0, CORRELATE_LOG_WARN, "%" PRIu64 " counts unsent at the end (%s)", left,
				 p->sock.fd < 0 ? "no usable socket" : "the agent's queue stayed full");
		unsent += left;
	}
	c->stats.counts_dropped += unsent;
	c->stats.counts_unsent_at_exit += unsent;
	return unsent;
}

/* ---- stats ---- */

static uint32_t percentile_ms(const uint64_t *hist, uint64_t total, uint64_t num, uint64_t den)
{
	uint64_t want = (total * num + den - 1) / den, seen = 0;
	for (unsigned i = 0; i < CORRELATE_LATENCY_BUCKETS; i++) {
		seen += hist[i];
		if (seen >= want && seen)
			return (i + 1) * CORRELATE_LATENCY_BUCKET_MS;
	}
	return 0;
}

int correlate_stats(const struct correlate *c, struct correlate_stats *out)
{
	if (!c || !out)
		return -EINVAL;
	*out = c->stats;
	out->counts_pending = 0;
	uint64_t v;
	for (uint32_t pos = 0; hindex_next(&c->procs, &pos, &v);) {
		const struct corr_proc *p = (const struct corr_proc *)(uintptr_t)v;
		out->apm_processes++;
		out->apm_ready += p->state == PS_READY;
		out->counts_pending += p->pending.total;
	}
	uint64_t total = 0;
	memcpy(out->latency_hist, c->hist, sizeof(out->latency_hist));
	for (unsigned i = 0; i < CORRELATE_LATENCY_BUCKETS; i++)
		total += c->hist[i];
	out->latency_p50_ms = percentile_ms(c->hist, total, 50, 100);
	out->latency_p99_ms = percentile_ms(c->hist, total, 99, 100);
	out->latency_max_ms = percentile_ms(c->hist, total, 1, 1);
	out->delay_ms = c->opts.delay_ms;
	return 0;
}
