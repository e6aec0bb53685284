/*
 * Unit tests for unwind/unwind_deltas.c.
 *
 * Real samples: this thread's registers and a copy of its stack, captured in the deepest function of a
 * noinline chain f1 -> f2 -> f3 built without frame pointers, in a thread, inside a signal handler and in a
 * deep recursion; modules come from /proc/self/maps and libelf, frames are named from the ELF symbol tables.
 * Synthetic samples: hand-built stacks over a fixture assembled at test time, one rule kind at a time
 * (SP/FP-based, PLT, DRAP deref, signal frame, fallback hook, non-advancing SP, end of the copy), and JIT code
 * walked by frame pointer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "unwind/unwind_deltas.h"

#define STACK_COPY (16 * 1024)
/* No inlining, no clones (f.isra.0): the frames must carry these names. */
#define NOFP __attribute__((noinline, noipa, optimize("omit-frame-pointer")))

/* ---- modules of this process ---------------------------------------------------------------------------- */

struct test_map {
	uint64_t start, end, pgoff, bias;
	int fd;
	Elf *elf;
	struct stack_deltas *deltas;	/* prebuilt table, used when maps.prebuilt */
	char path[256];
};

struct test_maps {
	struct test_map m[64];
	size_t n;
	bool prebuilt;
	unsigned lookups;
};

/* A delta unwinder with the options given; the test fails if it cannot be made. */
static struct unwind_deltas *deltas_new(const struct unwind_deltas_options *opts)
{
	struct unwind_deltas *u = NULL;
	assert_int_equal(unwind_deltas_new(opts, &u), 0);
	return u;
}

static int map_bias(struct test_map *m)
{
	size_t n;
	if (elf_getphdrnum(m->elf, &n) != 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(m->elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if ((ph.p_offset & ~0xfffull) <= m->pgoff && m->pgoff < ph.p_offset + ph.p_filesz) {
			m->bias = m->start - m->pgoff + ph.p_offset - ph.p_vaddr;
			return 0;
		}
	}
	return -1;
}

static void load_maps(struct test_maps *maps)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	assert_non_null(f);
	memset(maps, 0, sizeof(*maps));
	while (fgets(line, sizeof(line), f) && maps->n < 64) {
		struct test_map *m = &maps->m[maps->n];
		char perms[8], path[256] = "";
		unsigned long long start, end, off;
		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %255s", &start, &end, perms, &off, path) < 4 ||
		    perms[2] != 'x' || path[0] != '/')
			continue;
		*m = (struct test_map){ .start = start, .end = end, .pgoff = off, .fd = -1 };
		snprintf(m->path, sizeof(m->path), "%s", path);
		m->fd = open(path, O_RDONLY | O_CLOEXEC);
		m->elf = m->fd >= 0 ? elf_begin(m->fd, ELF_C_READ_MMAP, NULL) : NULL;
		if (!m->elf || map_bias(m) < 0) {
			elf_end(m->elf);
			if (m->fd >= 0)
				close(m->fd);
			continue;
		}
		maps->n++;
	}
	fclose(f);
}

static void free_maps(struct test_maps *maps)
{
	for (size_t i = 0; i < maps->n; i++) {
		stack_deltas_free(maps->m[i].deltas);
		elf_end(maps->m[i].elf);
		close(maps->m[i].fd);
	}
}

static struct test_map *map_of(struct test_maps *maps, uint64_t addr)
{
	for (size_t i = 0; i < maps->n; i++)
		if (addr >= maps->m[i].start && addr < maps->m[i].end)
			return &maps->m[i];
	return NULL;
}

static int find_module(void *ctx, uint64_t addr, struct unwind_module *mod)
{
	struct test_maps *maps = ctx;
	struct test_map *m = map_of(maps, addr);
	maps->lookups++;
	if (!m)
		return -ENOENT;
	mod->start = m->start;
	mod->end = m->end;
	mod->pgoff = m->pgoff;
	mod->bias = m->bias;
	mod->elf = m->elf;
	mod->cache_key = m;
	mod->deltas = maps->prebuilt ? m->deltas : NULL;
	return 0;
}

/* Name of the function containing ELF address va, from .symtab, else .dynsym. */
static const char *elf_func_name(Elf *elf, uint64_t va, Elf64_Word type)
{
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != type || sh.sh_entsize != sizeof(Elf64_Sym))
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sizeof(Elf64_Sym); i++) {
			GElf_Sym s;
			if (gelf_getsym(d, (int)i, &s) && GELF_ST_TYPE(s.st_info) == STT_FUNC && va >= s.st_value &&
			    va < s.st_value + s.st_size)
				return elf_strptr(elf, sh.sh_link, s.st_name);
		}
	}
	return NULL;
}

static const char *frame_name(struct test_maps *maps, const struct unwind_frame *f, bool leaf)
{
	uint64_t addr = leaf || (f->flags & UNWIND_FRAME_SIGNAL) ? f->ip : f->ip - 1;
	struct test_map *m = map_of(maps, addr);
	const char *n = m ? elf_func_name(m->elf, addr - m->bias, SHT_SYMTAB) : NULL;
	if (m && !n)
		n = elf_func_name(m->elf, addr - m->bias, SHT_DYNSYM);
	return n ? n : "?";
}

static void print_frames(struct test_maps *maps, const struct unwind_frame *f, int n, enum unwind_status st)
{
	printf("  %d frames, status %d:", n, (int)st);
	for (int i = 0; i < n; i++)
		printf(" %s%s", frame_name(maps, &f[i], i == 0), f[i].flags & UNWIND_FRAME_SIGNAL ? "[sig]" : "");
	printf("\n");
}

static int find_frame(struct test_maps *maps, const struct unwind_frame *f, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcmp(frame_name(maps, &f[i], i == 0), name) == 0)
			return i;
	return -1;
}

/* ---- capturing a real sample ---------------------------------------------------------------------------- */

struct capture {
	struct unwind_sample sample;
	uint8_t stack[STACK_COPY];
	size_t want;		/* bytes to copy (<= STACK_COPY) */
};

/* Stores the caller's callee-saved registers, its SP and its IP as they are right after this call returns:
 * a sample "taken" at the return address in the caller. */
void test_unwind_deltas_capture_regs(uint64_t *regs);
__asm__(".text\n"
	".globl test_unwind_deltas_capture_regs\n"
	".type test_unwind_deltas_capture_regs,@function\n"
	"test_unwind_deltas_capture_regs:\n"
	".cfi_startproc\n"
	"	mov %rbx, 8(%rdi)\n"		/* UNWIND_REG_BX = 1 */
	"	mov %rbp, 48(%rdi)\n"		/* BP = 6 */
	"	lea 8(%rsp), %rax\n"
	"	mov %rax, 56(%rdi)\n"		/* SP = 7 */
	"	mov (%rsp), %rax\n"
	"	mov %rax, 64(%rdi)\n"		/* IP = 8 */
	"	mov %r12, 160(%rdi)\n"		/* R12 = 20 */
	"	mov %r13, 168(%rdi)\n"
	"	mov %r14, 176(%rdi)\n"
	"	mov %r15, 184(%rdi)\n"
	"	ret\n"
	".cfi_endproc\n"
	".size test_unwind_deltas_capture_regs,.-test_unwind_deltas_capture_regs\n");

/* Copy user stack bytes as perf would: redzones and all, so not through (instrumented) memcpy. */
__attribute__((noinline, no_sanitize_address)) static void copy_stack(uint8_t *dst, uint64_t src, size_t n)
{
	const volatile uint8_t *s = (const volatile uint8_t *)(uintptr_t)src;
	for (size_t i = 0; i < n; i++)
		dst[i] = s[i];
}

static uint64_t stack_top(void)
{
	pthread_attr_t a;
	void *addr;
	size_t size;
	if (pthread_getattr_np(pthread_self(), &a) != 0)
		return 0;
	pthread_attr_getstack(&a, &addr, &size);
	pthread_attr_destroy(&a);
	return (uint64_t)(uintptr_t)addr + size;
}

/* Called right after test_unwind_deltas_capture_regs, in the same function: copy the stack from the sampled SP. */
static void capture_stack(struct capture *c)
{
	uint64_t sp = c->sample.regs[UNWIND_REG_SP], top = stack_top();
	size_t n = c->want ? c->want : STACK_COPY;
	if (top > sp && top - sp < n)
		n = (size_t)(top - sp);
	copy_stack(c->stack, sp, n);
	c->sample.stack = c->stack;
	c->sample.stack_size = n;
}

NOFP static void f3(struct capture *c)
{
	volatile char pad[24];
	pad[0] = 3;
	test_unwind_deltas_capture_regs(c->sample.regs);
	capture_stack(c);
	pad[1] = pad[0];
}

NOFP static void f2(struct capture *c)
{
	volatile char pad[40];
	pad[0] = 2;
	f3(c);
	pad[1] = pad[0];
}

NOFP static void f1(struct capture *c)
{
	volatile char pad[56];
	pad[0] = 1;
	f2(c);
	pad[1] = pad[0];
}

NOFP static int recurse(struct capture *c, int depth)
{
	volatile char pad[100];
	pad[0] = (char)depth;
	if (depth == 0) {
		test_unwind_deltas_capture_regs(c->sample.regs);
		capture_stack(c);
		return pad[0];
	}
	return recurse(c, depth - 1) + pad[0];
}

struct env {
	struct test_maps maps;
	struct unwind_process proc;
	struct unwind_deltas *u;
	struct capture cap;	/* main-thread sample f1 -> f2 -> f3 */
};

static struct env *env;

static int group_setup(void **state)
{
	(void)state;
	elf_version(EV_CURRENT);
	env = calloc(1, sizeof(*env));
	if (!env)
		return -1;
	load_maps(&env->maps);
	env->proc = (struct unwind_process){ .find_module = find_module, .ctx = &env->maps };
	env->u = deltas_new(NULL);
	f1(&env->cap);
	return env->u ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	unwind_deltas_free(env->u);
	free_maps(&env->maps);
	free(env);
	return 0;
}

/* ---- real samples --------------------------------------------------------------------------------------- */

static void test_chain_to_main(void **state)
{
	(void)state;
	struct unwind_frame fr[UNWIND_MAX_FRAMES];
	enum unwind_status st;
	int n = unwind_deltas_unwind(env->u, &env->proc, &env->cap.sample, fr, UNWIND_MAX_FRAMES, &st);
	print_frames(&env->maps, fr, n, st);
	assert_true(n >= 5);
	assert_string_equal(frame_name(&env->maps, &fr[0], true), "f3");
	assert_int_equal(fr[0].ip, env->cap.sample.regs[UNWIND_REG_IP]);
	assert_string_equal(frame_name(&env->maps, &fr[1], false), "f2");
	assert_string_equal(frame_name(&env->maps, &fr[2], false), "f1");
	assert_string_equal(frame_name(&env->maps, &fr[3], false), "group_setup");
	assert_true(find_frame(&env->maps, fr, n, "main") > 3);
	assert_string_equal(frame_name(&env->maps, &fr[n - 1], false), "_start");
	assert_int_equal(st, UNWIND_COMPLETE);
	for (int i = 0; i < n; i++)
		assert_int_equal(fr[i].flags, 0);
}

/* The same sample with tables the caller built: same frames, no table built by the unwinder. */
static void test_prebuilt_tables(void **state)
{
	(void)state;
	struct unwind_deltas *u = deltas_new(NULL);
	struct unwind_frame a[UNWIND_MAX_FRAMES], b[UNWIND_MAX_FRAMES];
	enum unwind_status sa, sb;
	int na = unwind_deltas_unwind(env->u, &env->proc, &env->cap.sample, a, UNWIND_MAX_FRAMES, &sa);
	for (size_t i = 0; i < env->maps.n; i++)
		assert_int_equal(stack_deltas_build(env->maps.m[i].elf, &env->maps.m[i].deltas, NULL), 0);
	env->maps.prebuilt = true;
	int nb = unwind_deltas_unwind(u, &env->proc, &env->cap.sample, b, UNWIND_MAX_FRAMES, &sb);
	env->maps.prebuilt = false;
	struct unwind_deltas_stats st;
	unwind_deltas_get_stats(u, &st);
	assert_int_equal(st.tables_built, 0);
	assert_int_equal(na, nb);
	assert_int_equal(sa, sb);
	for (int i = 0; i < na; i++) {
		assert_int_equal(a[i].ip, b[i].ip);
		assert_int_equal(a[i].flags, b[i].flags);
	}
	unwind_deltas_free(u);
}

static void test_max_frames(void **state)
{
	(void)state;
	struct unwind_frame fr[5];
	enum unwind_status st;
	assert_int_equal(unwind_deltas_unwind(env->u, &env->proc, &env->cap.sample, fr, 5, &st), 5);
	assert_int_equal(st, UNWIND_TRUNCATED);
	assert_int_equal(unwind_deltas_unwind(env->u, &env->proc, &env->cap.sample, fr, 0, &st), 0);
	assert_int_equal(st, UNWIND_TRUNCATED);
}

static void *thread_main(void *arg)
{
	f1(arg);
	return NULL;
}

static void test_thread_to_clone(void **state)
{
	(void)state;
	struct capture *c = calloc(1, sizeof(*c));
	pthread_t th;
	assert_non_null(c);
	assert_int_equal(pthread_create(&th, NULL, thread_main, c), 0);
	pthread_join(th, NULL);
	struct unwind_frame fr[UNWIND_MAX_FRAMES];
	enum unwind_status st;
	int n = unwind_deltas_unwind(env->u, &env->proc, &c->sample, fr, UNWIND_MAX_FRAMES, &st);
	print_frames(&env->maps, fr, n, st);
	assert_true(n >= 5);
	assert_string_equal(frame_name(&env->maps, &fr[0], true), "f3");
	assert_string_equal(frame_name(&env->maps, &fr[1], false), "f2");
	assert_string_equal(frame_name(&env->maps, &fr[2], false), "f1");
	assert_string_equal(frame_name(&env->maps, &fr[3], false), "thread_main");
	assert_int_equal(st, UNWIND_COMPLETE);	/* clone3's child code marks the return address undefined */
	free(c);
}

static struct capture *sig_capture;
static volatile sig_atomic_t sig_done;

NOFP static void on_alarm(int sig)
{
	(void)sig;
	if (sig_capture && !sig_done) {
		test_unwind_deltas_capture_regs(sig_capture->sample.regs);
		capture_stack(sig_capture);
	}
	sig_done = 1;
}

NOFP static void spin(void)
{
	while (!sig_done)
		__asm__ volatile("" ::: "memory");
}

static void test_signal_frame(void **state)
{
	(void)state;
	struct capture *c = calloc(1, sizeof(*c));
	struct sigaction sa, old;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	assert_int_equal(sigaction(SIGALRM, &sa, &old), 0);
	assert_int_equal(sigaction(SIGALRM, NULL, &sa), 0);	/* to learn the restorer glibc installed */
	sig_capture = c;
	sig_done = 0;
	struct itimerval it = { .it_value = { .tv_usec = 2000 } };
	assert_int_equal(setitimer(ITIMER_REAL, &it, NULL), 0);
	spin();
	sigaction(SIGALRM, &old, NULL);
	sig_capture = NULL;

	struct unwind_frame fr[UNWIND_MAX_FRAMES];
	enum unwind_status st;
	int n = unwind_deltas_unwind(env->u, &env->proc, &c->sample, fr, UNWIND_MAX_FRAMES, &st);
	print_frames(&env->maps, fr, n, st);
	assert_true(n >= 4);
	assert_string_equal(frame_name(&env->maps, &fr[0], true), "on_alarm");
	assert_int_equal(fr[1].ip, (uint64_t)(uintptr_t)sa.sa_restorer);	/* __restore_rt */
	assert_int_equal(fr[1].flags, 0);
	assert_int_equal(fr[2].flags, UNWIND_FRAME_SIGNAL);	/* interrupted: its IP is exact */
	assert_string_equal(frame_name(&env->maps, &fr[2], false), "spin");
	assert_string_equal(frame_name(&env->maps, &fr[3], false), "test_signal_frame");
	assert_true(find_frame(&env->maps, fr, n, "main") > 3);
	assert_int_equal(st, UNWIND_COMPLETE);
	free(c);
}

static void test_deep_recursion_truncated(void **state)
{
	(void)state;
	struct capture *c = calloc(1, sizeof(*c));
	assert_non_null(c);
	recurse(c, 1000);
	struct unwind_frame fr[UNWIND_MAX_FRAMES];
	enum unwind_status st;
	int n = unwind_deltas_unwind(env->u, &env->proc, &c->sample, fr, UNWIND_MAX_FRAMES, &st);
	printf("  recursion: %d frames from a %zu-byte copy\n", n, c->sample.stack_size);
	assert_int_equal(st, UNWIND_TRUNCATED);
	assert_true(n > 20 && n < UNWIND_MAX_FRAMES);
	for (int i = 0; i < n; i++)
		assert_string_equal(frame_name(&env->maps, &fr[i], i == 0), "recurse");
	free(c);
}

/* A stack-extension hook serving the rest of a full copy, as the live process would. */
struct extension {
	const uint8_t *full;
	size_t full_size;
	int calls;
	int fail;		/* answer -ESTALE */
	uint64_t zero_at;	/* nonzero: that address reads as 0 in the extension */
	uint8_t patched[STACK_COPY];
};

static int serve_extension(void *ctx, const struct unwind_process *proc, const struct unwind_sample *stack,
			   uint64_t addr, struct unwind_sample *longer)
{
	struct extension *x = ctx;
	(void)proc;
	x->calls++;
	assert_true(addr >= stack->regs[UNWIND_REG_SP] + stack->stack_size);
	if (x->fail)
		return -ESTALE;
	memcpy(x->patched, x->full, x->full_size);
	if (x->zero_at)
		memset(x->patched + (x->zero_at - stack->regs[UNWIND_REG_SP]), 0, 8);
	longer->regs[UNWIND_REG_SP] = stack->regs[UNWIND_REG_SP];
	longer->stack = x->patched;
	longer->stack_size = x->full_size;
	return 0;
}

/* A copy that ends inside f2's frame: the hook extends it, the walk goes on as over the full copy. */
static void test_stack_extension(void **state)
{
	(void)state;
	struct extension *x = calloc(1, sizeof(*x));
	struct unwind_deltas_options o = { .stack_extend = serve_extension, .stack_extend_ctx = x };
	struct unwind_deltas *u = deltas_new(&o);
	struct unwind_frame full[UNWIND_MAX_FRAMES], fr[UNWIND_MAX_FRAMES];
	enum unwind_status full_st, st;
	assert_non_null(x);
	assert_non_null(u);
	int nfull = unwind_deltas_unwind(env->u, &env->proc, &env->cap.sample, full, UNWIND_MAX_FRAMES, &full_st);
	assert_int_equal(full_st, UNWIND_COMPLETE);
	struct unwind_sample cut = env->cap.sample;
	cut.stack_size = 64;	/* f3's frame only: f3's return address into f2 is past it */
	x->full = env->cap.sample.stack;
	x->full_size = env->cap.sample.stack_size;

	int n = unwind_deltas_unwind(u, &env->proc, &cut, fr, UNWIND_MAX_FRAMES, &st);
	assert_int_equal(st, UNWIND_COMPLETE);
	assert_int_equal(n, nfull);
	for (int i = 0; i < n; i++)
		assert_int_equal(fr[i].ip, full[i].ip);
	assert_int_equal(x->calls, 1);

	/* Refused: the walk ends where the copy does, and the hook is not asked again in that walk. */
	x->fail = 1;
	x->calls = 0;
	n = unwind_deltas_unwind(u, &env->proc, &cut, fr, UNWIND_MAX_FRAMES, &st);
	assert_int_equal(st, UNWIND_TRUNCATED);
	assert_true(n >= 1 && n < nfull);
	assert_int_equal(x->calls, 1);

	/* A zero return address read past the copy is no proof of the outermost frame: truncated, not complete. */
	x->fail = 0;
	uint64_t sp = cut.regs[UNWIND_REG_SP];
	for (uint64_t a = sp + 64; a + 8 <= sp + x->full_size; a += 8) {
		uint64_t v;
		memcpy(&v, x->full + (a - sp), 8);
		if (v == full[2].ip) {	/* f2's return address into f1 */
			x->zero_at = a;
			break;
		}
	}
	assert_true(x->zero_at != 0);
	n = unwind_deltas_unwind(u, &env->proc, &cut, fr, UNWIND_MAX_FRAMES, &st);
	assert_int_equal(st, UNWIND_TRUNCATED);
	assert_int_equal(n, 2);
	struct unwind_deltas_stats ust;
	unwind_deltas_get_stats(u, &ust);
	assert_int_equal(ust.stack_extensions, 2);
	assert_int_equal(ust.stack_extension_failures, 1);
	unwind_deltas_free(u);
	free(x);
}

static uint32_t next_rand(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

/* Random stacks and registers, some pointing into real code and stack: never crash, stay in bounds. */
static void test_garbage_never_crashes(void **state)
{
	(void)state;
	struct capture *c = calloc(1, sizeof(*c));
	assert_non_null(c);
	uint32_t seed = 0xdecafbad;
	uint64_t sp = env->cap.sample.regs[UNWIND_REG_SP];
	uint64_t code = env->cap.sample.regs[UNWIND_REG_IP];
	uint64_t chain[300];	/* a frame-pointer chain of return-address-like garbage, longer than any walk */
	for (int round = 0; round < 2000; round++) {
		uint64_t *words = (uint64_t *)c->stack;
		for (size_t i = 0; i < STACK_COPY / 8; i++) {
			uint32_t r = next_rand(&seed);
			words[i] = r % 3 == 0 ? code + (r >> 20) - 2048 : r % 3 == 1 ? sp + (r >> 16) : (uint64_t)r << 32 | next_rand(&seed);
		}
		c->sample = env->cap.sample;
		c->sample.stack = c->stack;
		c->sample.stack_size = round % 7 == 0 ? next_rand(&seed) % 64 : STACK_COPY;
		c->sample.regs[UNWIND_REG_IP] = code + next_rand(&seed) % 65536 - 32768;
		c->sample.regs[UNWIND_REG_BP] = sp + next_rand(&seed) % (2 * STACK_COPY);
		chain[0] = round % 2 ? c->sample.regs[UNWIND_REG_IP] : next_rand(&seed);
		for (size_t i = 1; i < sizeof(chain) / sizeof(chain[0]); i++)
			chain[i] = code + next_rand(&seed) % 65536 - 32768;
		c->sample.fp_chain = round % 3 ? chain : NULL;
		c->sample.fp_chain_len = next_rand(&seed) % (sizeof(chain) / sizeof(chain[0]) + 1);
		struct unwind_frame fr[UNWIND_MAX_FRAMES];
		enum unwind_status st;
		int n = unwind_deltas_unwind(env->u, &env->proc, &c->sample, fr, UNWIND_MAX_FRAMES, &st);
		assert_true(n >= 1 && n <= UNWIND_MAX_FRAMES);
		assert_true(st == UNWIND_COMPLETE || st == UNWIND_TRUNCATED || st == UNWIND_UNKNOWN_LEAF);
	}
	struct unwind_sample empty = { .regs = { [UNWIND_REG_IP] = code, [UNWIND_REG_SP] = sp } };
	struct unwind_frame fr[4];
	enum unwind_status st;
	assert_int_equal(unwind_deltas_unwind(env->u, &env->proc, &empty, fr, 4, &st), 1);
	assert_int_equal(st, UNWIND_TRUNCATED);
	empty.regs[UNWIND_REG_IP] = 8;	/* in no module */
	assert_int_equal(unwind_deltas_unwind(env->u, &env->proc, &empty, fr, 4, &st), 1);
	assert_int_equal(st, UNWIND_UNKNOWN_LEAF);
	assert_int_equal(fr[0].ip, 8);
	free(c);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void test_speed_and_cache(void **state)
{
	(void)state;
	struct unwind_frame fr[UNWIND_MAX_FRAMES];
	enum unwind_status st;
	struct unwind_deltas_stats before, after;
	int n = unwind_deltas_unwind(env->u, &env->proc, &env->cap.sample, fr, UNWIND_MAX_FRAMES, &st);
	unwind_deltas_get_stats(env->u, &before);
	const int iters = 200000;
	uint64_t t0 = now_ns();
	for (int i = 0; i < iters; i++)
		unwind_deltas_unwind(env->u, &env->proc, &env->cap.sample, fr, UNWIND_MAX_FRAMES, &st);
	uint64_t dt = now_ns() - t0;
	unwind_deltas_get_stats(env->u, &after);
	printf("deltas unwinder: %.1f ns/frame, %.0f ns/sample (%d frames, warm cache; find_module included)\n",
	       (double)dt / ((double)iters * n), (double)dt / iters, n);
	assert_int_equal(after.cache_misses, before.cache_misses);
	assert_true(after.cache_hits - before.cache_hits >= (uint64_t)iters * (uint64_t)(n - 1));

	/* Forgetting a file drops its table and rules: the next walk builds it again. */
	struct test_map *exe = map_of(&env->maps, env->cap.sample.regs[UNWIND_REG_IP]);
	assert_non_null(exe);
	unwind_deltas_forget(env->u, exe);
	assert_int_equal(unwind_deltas_unwind(env->u, &env->proc, &env->cap.sample, fr, UNWIND_MAX_FRAMES, &st), n);
	unwind_deltas_get_stats(env->u, &after);
	assert_int_equal(after.tables_built, before.tables_built + 1);
	assert_true(after.cache_misses > before.cache_misses);
}

/* ---- synthetic samples over an assembled fixture -------------------------------------------------------- */

static const char fixture_asm[] =
	"	.text\n"
	"	.p2align 4\n"
	"	.type sp_func,@function\n"
	"sp_func:\n"
	"	.cfi_startproc\n"
	"	push %rbx\n"
	"	.cfi_def_cfa_offset 16\n"
	"	sub $32, %rsp\n"
	"sp_body:\n"
	"	.cfi_def_cfa_offset 48\n"
	"	call leaf\n"
	"sp_ret:\n"
	"	add $32, %rsp\n"
	"	.cfi_def_cfa_offset 16\n"
	"	pop %rbx\n"
	"	.cfi_def_cfa_offset 8\n"
	"	ret\n"
	"	.cfi_endproc\n"
	"	.p2align 4\n"
	"	.type fp_func,@function\n"
	"fp_func:\n"
	"	.cfi_startproc\n"
	"	push %rbp\n"
	"fp_pushed:\n"
	"	.cfi_def_cfa_offset 16\n"
	"	.cfi_offset %rbp, -16\n"
	"	mov %rsp, %rbp\n"
	"	.cfi_def_cfa_register %rbp\n"
	"	call leaf\n"
	"fp_ret:\n"
	"	leave\n"
	"	.cfi_def_cfa %rsp, 8\n"
	"	ret\n"
	"	.cfi_endproc\n"
	"	.p2align 4\n"
	"	.type plt_like,@function\n"
	"plt_like:\n"
	"	.cfi_startproc\n"
	"	.cfi_escape 0x0f,0x0b,0x77,0x08,0x80,0x00,0x3f,0x1a,0x3b,0x2a,0x33,0x24,0x22\n"
	"	.fill 16, 1, 0x90\n"
	"	.cfi_endproc\n"
	"	.p2align 4\n"
	"	.type drap_func,@function\n"
	"drap_func:\n"
	"	.cfi_startproc\n"
	"	lea 8(%rsp), %r10\n"
	"drap_r10:\n"
	"	.cfi_def_cfa %r10, 0\n"
	"	and $-32, %rsp\n"
	"	push -8(%r10)\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	.cfi_escape 0x10,0x06,0x02,0x76,0x00\n"
	"	push %r10\n"
	"	.cfi_escape 0x0f,0x03,0x76,0x78,0x06\n"
	"	call leaf\n"
	"drap_ret:\n"
	"	ret\n"
	"	.cfi_endproc\n"
	"	.p2align 4\n"
	"	.type stop_func,@function\n"
	"stop_func:\n"
	"	.cfi_startproc\n"
	"	.cfi_undefined %rip\n"
	"	xor %ebp, %ebp\n"
	"	call leaf\n"
	"stop_ret:\n"
	"	hlt\n"
	"	.cfi_endproc\n"
	"	.p2align 5\n"
	"	.type sig_func,@function\n"
	"sig_func:\n"
	"	.cfi_startproc\n"
	"	.cfi_signal_frame\n"
	"	mov $15, %rax\n"
	"	syscall\n"
	"	.cfi_endproc\n"
	"	.p2align 5\n"
	"	.type frameless,@function\n"
	"frameless:\n"
	"	push %rbx\n"
	"	sub $16, %rsp\n"
	"frameless_body:\n"
	"	call leaf\n"
	"	add $16, %rsp\n"
	"	pop %rbx\n"
	"	ret\n"
	"	.p2align 5\n"
	"	.type vfp_func,@function\n"
	"vfp_func:\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	sub %rcx, %rsp\n"
	"vfp_body:\n"
	"	call leaf\n"
	"	leave\n"
	"	ret\n"
	"	.p2align 4\n"
	"	.type leaf,@function\n"
	"leaf:\n"
	"	ret\n";

#define FAKE_BIAS 0x500000000000ull
#define FAKE_SP 0x7ffd00000000ull

struct synth {
	char dir[64];
	int fd;
	Elf *elf;
	struct unwind_process proc;
	uint64_t stack[512];
	struct unwind_sample s;
	int fallback_calls;
	struct unwind_deltas_regs fallback_seen;
	int fallback_rc;
	struct unwind_deltas_regs fallback_caller;
};

static int synth_find_module(void *ctx, uint64_t addr, struct unwind_module *mod)
{
	struct synth *sy = ctx;
	if (addr < FAKE_BIAS || addr >= FAKE_BIAS + 0x100000)
		return -ENOENT;
	*mod = (struct unwind_module){ .start = FAKE_BIAS, .end = FAKE_BIAS + 0x100000, .bias = FAKE_BIAS,
				       .elf = sy->elf, .cache_key = sy };
	return 0;
}

static uint64_t fsym(struct synth *sy, const char *name)
{
	for (Elf_Scn *scn = elf_nextscn(sy->elf, NULL); scn; scn = elf_nextscn(sy->elf, scn)) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sizeof(Elf64_Sym); i++) {
			GElf_Sym s;
			const char *n;
			if (gelf_getsym(d, (int)i, &s) && (n = elf_strptr(sy->elf, sh.sh_link, s.st_name)) &&
			    strcmp(n, name) == 0)
				return FAKE_BIAS + s.st_value;
		}
	}
	fail_msg("no symbol %s", name);
	return 0;
}

static int synth_setup(void **state)
{
	struct synth *sy = calloc(1, sizeof(*sy));
	char path[128], cmd[320];
	snprintf(sy->dir, sizeof(sy->dir), "/tmp/hostprof-ud-XXXXXX");
	if (!mkdtemp(sy->dir))
		return -1;
	snprintf(path, sizeof(path), "%s/fixture.s", sy->dir);
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(fixture_asm, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "gcc -shared -nostdlib -o %s/fixture.so %s", sy->dir, path);
	if (system(cmd) != 0)
		return -1;
	snprintf(path, sizeof(path), "%s/fixture.so", sy->dir);
	sy->fd = open(path, O_RDONLY | O_CLOEXEC);
	sy->elf = sy->fd >= 0 ? elf_begin(sy->fd, ELF_C_READ_MMAP, NULL) : NULL;
	sy->proc = (struct unwind_process){ .find_module = synth_find_module, .ctx = sy };
	sy->s.stack = (const uint8_t *)sy->stack;
	sy->s.stack_size = sizeof(sy->stack);
	sy->s.regs[UNWIND_REG_SP] = FAKE_SP;
	*state = sy;
	return sy->elf ? 0 : -1;
}

static int synth_teardown(void **state)
{
	struct synth *sy = *state;
	char cmd[128];
	elf_end(sy->elf);
	close(sy->fd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", sy->dir);
	int rc = system(cmd);
	free(sy);
	return rc == 0 ? 0 : -1;
}

/* Put a word at FAKE_SP + off in the synthetic stack. */
static void put(struct synth *sy, uint64_t off, uint64_t v)
{
	sy->stack[off / 8] = v;
}

static int synth_unwind(struct synth *sy, struct unwind_deltas *u, struct unwind_frame *fr, size_t max,
			enum unwind_status *st)
{
	return unwind_deltas_unwind(u, &sy->proc, &sy->s, fr, max, st);
}

/* SP-based frame -> FP-based frame -> outermost frame. */
static void test_synth_sp_fp_stop(void **state)
{
	struct synth *sy = *state;
	struct unwind_deltas *u = deltas_new(NULL);
	sy->s.regs[UNWIND_REG_IP] = fsym(sy, "sp_body");
	sy->s.regs[UNWIND_REG_BP] = FAKE_SP + 128;
	put(sy, 40, fsym(sy, "fp_ret"));		/* CFA = sp + 48 */
	put(sy, 128, FAKE_SP + 256);			/* fp_func: saved rbp at CFA - 16 = fp */
	put(sy, 136, fsym(sy, "stop_ret"));		/* RA at CFA - 8 = fp + 8 */
	struct unwind_frame fr[8];
	enum unwind_status st;
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 3);
	assert_int_equal(st, UNWIND_COMPLETE);
	assert_int_equal(fr[0].ip, fsym(sy, "sp_body"));
	assert_int_equal(fr[1].ip, fsym(sy, "fp_ret"));
	assert_int_equal(fr[2].ip, fsym(sy, "stop_ret"));

	/* An FP below SP would not advance: truncated, not a loop. */
	sy->s.regs[UNWIND_REG_IP] = fsym(sy, "fp_ret") - 1;
	sy->s.regs[UNWIND_REG_BP] = FAKE_SP - 64;
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 1);
	assert_int_equal(st, UNWIND_TRUNCATED);
	/* A CFA past the end of the copy: truncated. */
	sy->s.regs[UNWIND_REG_BP] = FAKE_SP + sizeof(sy->stack);
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 1);
	assert_int_equal(st, UNWIND_TRUNCATED);
	/* A zero return address ends the stack. */
	sy->s.regs[UNWIND_REG_IP] = fsym(sy, "sp_body");
	put(sy, 40, 0);
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 1);
	assert_int_equal(st, UNWIND_COMPLETE);
	unwind_deltas_free(u);
}

/* PLT: the CFA depends on where in the 16-byte entry the IP is. */
static void test_synth_plt(void **state)
{
	struct synth *sy = *state;
	struct unwind_deltas *u = deltas_new(NULL);
	struct unwind_frame fr[2];
	enum unwind_status st;
	put(sy, 0, fsym(sy, "stop_ret"));
	put(sy, 8, fsym(sy, "fp_ret"));
	sy->s.regs[UNWIND_REG_IP] = fsym(sy, "plt_like") + 6;	/* (ip & 15) < 11: CFA = sp + 8 */
	assert_int_equal(synth_unwind(sy, u, fr, 2, &st), 2);
	assert_int_equal(fr[1].ip, fsym(sy, "stop_ret"));
	sy->s.regs[UNWIND_REG_IP] = fsym(sy, "plt_like") + 11;	/* pushed once more: CFA = sp + 16 */
	assert_int_equal(synth_unwind(sy, u, fr, 2, &st), 2);
	assert_int_equal(fr[1].ip, fsym(sy, "fp_ret"));
	unwind_deltas_free(u);
}

/* DRAP: CFA = *(fp - 8); the caller's FP is at fp + 0 and is used by the next (FP-based) frame. */
static void test_synth_drap(void **state)
{
	struct synth *sy = *state;
	struct unwind_deltas *u = deltas_new(NULL);
	struct unwind_frame fr[8];
	enum unwind_status st;
	uint64_t fp = FAKE_SP + 64;
	sy->s.regs[UNWIND_REG_IP] = fsym(sy, "drap_ret");
	sy->s.regs[UNWIND_REG_BP] = fp;
	put(sy, 56, FAKE_SP + 200);			/* *(fp - 8): the CFA */
	put(sy, 64, FAKE_SP + 240);			/* *(fp + 0): the caller's rbp */
	put(sy, 192, fsym(sy, "fp_ret"));		/* RA at CFA - 8 */
	put(sy, 240, FAKE_SP + 400);			/* fp_func's frame, found through the restored rbp */
	put(sy, 248, fsym(sy, "stop_ret"));
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 3);
	assert_int_equal(fr[1].ip, fsym(sy, "fp_ret"));
	assert_int_equal(fr[2].ip, fsym(sy, "stop_ret"));
	assert_int_equal(st, UNWIND_COMPLETE);
	unwind_deltas_free(u);
}

/* A handler returns into the trampoline; the interrupted frame's IP is exact (no -1 lookup). */
static void test_synth_signal(void **state)
{
	struct synth *sy = *state;
	struct unwind_deltas *u = deltas_new(NULL);
	struct unwind_frame fr[8];
	enum unwind_status st;
	uint64_t uc = 48, gregs = uc + 40, isp = 1024;
	memset(sy->stack, 0, sizeof(sy->stack));
	sy->s.regs[UNWIND_REG_IP] = fsym(sy, "sp_body");
	put(sy, 40, fsym(sy, "sig_func"));		/* handler's RA: the trampoline */
	put(sy, gregs + 8 * REG_RIP, fsym(sy, "frameless_body"));
	put(sy, gregs + 8 * REG_RSP, FAKE_SP + isp);
	put(sy, gregs + 8 * REG_RBP, 0x1234);
	/* At frameless_body exactly the CFA is sp + 32; at frameless_body - 1 it would be sp + 16. */
	put(sy, isp + 24, fsym(sy, "stop_ret"));
	put(sy, isp + 8, fsym(sy, "fp_ret"));
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 4);
	assert_int_equal(fr[1].ip, fsym(sy, "sig_func"));
	assert_int_equal(fr[1].flags, 0);
	assert_int_equal(fr[2].ip, fsym(sy, "frameless_body"));
	assert_int_equal(fr[2].flags, UNWIND_FRAME_SIGNAL);
	assert_int_equal(fr[3].ip, fsym(sy, "stop_ret"));
	assert_int_equal(fr[3].flags, 0);
	assert_int_equal(st, UNWIND_COMPLETE);
	unwind_deltas_free(u);
}

static int fallback_hook(void *ctx, const struct unwind_process *proc, const struct unwind_sample *sample,
			 const struct unwind_module *mod, const struct unwind_deltas_regs *frame,
			 struct unwind_deltas_regs *caller)
{
	struct synth *sy = ctx;
	(void)proc;
	assert_ptr_equal(sample, &sy->s);
	assert_ptr_equal(mod->elf, sy->elf);
	sy->fallback_calls++;
	sy->fallback_seen = *frame;
	*caller = sy->fallback_caller;
	return sy->fallback_rc;
}

/* Rows the table cannot express go to the hook, for that frame only; without a hook they truncate. */
static void test_synth_fallback(void **state)
{
	struct synth *sy = *state;
	struct unwind_frame fr[8];
	enum unwind_status st;
	struct unwind_deltas *plain = deltas_new(NULL);
	sy->s.regs[UNWIND_REG_IP] = fsym(sy, "drap_r10");
	sy->s.regs[UNWIND_REG_R10] = FAKE_SP + 16;
	assert_int_equal(synth_unwind(sy, plain, fr, 8, &st), 1);
	assert_int_equal(st, UNWIND_TRUNCATED);
	unwind_deltas_free(plain);

	struct unwind_deltas_options opts = { .fallback = fallback_hook, .fallback_ctx = sy };
	struct unwind_deltas *u = deltas_new(&opts);
	sy->fallback_rc = 0;
	sy->fallback_caller = (struct unwind_deltas_regs){
		.regs = { [UNWIND_REG_IP] = fsym(sy, "stop_ret"), [UNWIND_REG_SP] = FAKE_SP + 16 },
		.known = UNWIND_DELTAS_REG(UNWIND_REG_IP) | UNWIND_DELTAS_REG(UNWIND_REG_SP),
	};
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 2);
	assert_int_equal(st, UNWIND_COMPLETE);
	assert_int_equal(fr[1].ip, fsym(sy, "stop_ret"));
	assert_int_equal(sy->fallback_calls, 1);
	assert_true(sy->fallback_seen.exact_ip);
	assert_int_equal(sy->fallback_seen.known, UNWIND_DELTAS_ALL_REGS);
	assert_int_equal(sy->fallback_seen.regs[UNWIND_REG_R10], FAKE_SP + 16);

	sy->fallback_rc = UNWIND_DELTAS_FALLBACK_END;
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 1);
	assert_int_equal(st, UNWIND_COMPLETE);
	sy->fallback_rc = -EINVAL;
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 1);
	assert_int_equal(st, UNWIND_TRUNCATED);
	sy->fallback_rc = 0;
	sy->fallback_caller.regs[UNWIND_REG_SP] = FAKE_SP;	/* not advancing: refused */
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 1);
	assert_int_equal(st, UNWIND_TRUNCATED);
	struct unwind_deltas_stats stats;
	unwind_deltas_get_stats(u, &stats);
	assert_int_equal(stats.fallback_calls, 4);
	assert_int_equal(stats.fallback_failures, 2);
	unwind_deltas_free(u);
}

/*
 * Rules guessed from code without CFI (frameless: no FDE) find callers only where a call instruction ends right
 * before them; a return address into such code must be one too. Anything else ends the walk, truncated.
 */
static void test_synth_guessed_callers(void **state)
{
	struct synth *sy = *state;
	struct unwind_deltas *u = deltas_new(NULL);
	struct unwind_frame fr[8];
	enum unwind_status st;
	struct unwind_deltas_stats stats;
	memset(sy->stack, 0, sizeof(sy->stack));
	/* At frameless_body (push rbx; sub $16, rsp): CFA = sp + 32, its return address at sp + 24. */
	sy->s.regs[UNWIND_REG_IP] = fsym(sy, "frameless_body");
	put(sy, 24, fsym(sy, "stop_ret"));		/* after stop_func's call: a caller */
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 2);
	assert_int_equal(st, UNWIND_COMPLETE);
	put(sy, 24, fsym(sy, "leaf"));			/* a function's entry: code, but after no call */
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 1);
	assert_int_equal(st, UNWIND_TRUNCATED);
	put(sy, 24, FAKE_BIAS + 0x80000);		/* in the module's range, in none of its code */
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 1);
	assert_int_equal(st, UNWIND_TRUNCATED);
	put(sy, 24, 0);					/* read where a guess pointed: ends nothing */
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 1);
	assert_int_equal(st, UNWIND_TRUNCATED);
	unwind_deltas_get_stats(u, &stats);
	assert_int_equal(stats.implausible_callers, 2);

	/* A frame with CFI whose return address points into code without: after its call, or no frame at all. */
	sy->s.regs[UNWIND_REG_IP] = fsym(sy, "sp_body");
	put(sy, 40, fsym(sy, "frameless_body") + 5);	/* after frameless's call leaf; its CFA is 32 further */
	put(sy, 48 + 24, fsym(sy, "stop_ret"));
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 3);
	assert_int_equal(st, UNWIND_COMPLETE);
	put(sy, 40, fsym(sy, "frameless_body") + 1);	/* inside that call instruction */
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 1);
	assert_int_equal(st, UNWIND_TRUNCATED);
	unwind_deltas_get_stats(u, &stats);
	assert_int_equal(stats.implausible_callers, 3);
	unwind_deltas_free(u);
}

/* ---- the sample's frame-pointer chain -------------------------------------------------------------------- */

/* A sample whose copy holds only its first bytes, with the kernel's frame-pointer chain. */
static void chain_sample(struct synth *sy, size_t copied, const uint64_t *chain, size_t n)
{
	sy->s.stack_size = copied;
	sy->s.fp_chain = chain;
	sy->s.fp_chain_len = n;
}

/*
 * fp_func (an rbp frame) sampled at fp_ret, its frame pointer past a 64-byte copy: the walk cannot load its
 * return address, the chain (what the kernel read above each saved frame pointer) says the callers were fp_func
 * again and stop_func. The leaf owns its frame pointer, so chain entry i is frame i.
 */
static void test_chain_after_copy(void **state)
{
	struct synth *sy = *state;
	struct unwind_deltas *u = deltas_new(NULL);
	struct unwind_frame fr[8];
	enum unwind_status st;
	uint64_t chain[] = { fsym(sy, "fp_ret"), fsym(sy, "fp_ret"), fsym(sy, "stop_ret") };
	sy->s.regs[UNWIND_REG_IP] = fsym(sy, "fp_ret");
	sy->s.regs[UNWIND_REG_BP] = FAKE_SP + 128;
	chain_sample(sy, 64, NULL, 0);
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 1);
	assert_int_equal(st, UNWIND_TRUNCATED);

	chain_sample(sy, 64, chain, 3);
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 3);
	assert_int_equal(st, UNWIND_COMPLETE);
	assert_int_equal(fr[1].ip, fsym(sy, "fp_ret"));
	assert_int_equal(fr[2].ip, fsym(sy, "stop_ret"));
	assert_int_equal(fr[1].flags | fr[2].flags, 0);

	/* At most max frames. */
	assert_int_equal(synth_unwind(sy, u, fr, 2, &st), 2);
	assert_int_equal(st, UNWIND_TRUNCATED);

	/* The copy alone finishes the walk: the chain is not used. */
	put(sy, 128, FAKE_SP + 256);
	put(sy, 136, fsym(sy, "stop_ret"));
	chain_sample(sy, sizeof(sy->stack), chain, 3);
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 2);
	assert_int_equal(st, UNWIND_COMPLETE);
	struct unwind_deltas_stats stats;
	unwind_deltas_get_stats(u, &stats);
	assert_int_equal(stats.fp_chain_walks, 2);
	unwind_deltas_free(u);
}

/* A frameless leaf (sp_func): FP is still its caller's, so the caller is not in the chain, its caller's caller is. */
static void test_chain_frameless_leaf(void **state)
{
	struct synth *sy = *state;
	struct unwind_deltas *u = deltas_new(NULL);
	struct unwind_frame fr[8];
	enum unwind_status st;
	uint64_t chain[] = { fsym(sy, "sp_body"), fsym(sy, "stop_ret") };
	sy->s.regs[UNWIND_REG_IP] = fsym(sy, "sp_body");
	sy->s.regs[UNWIND_REG_BP] = FAKE_SP + 128;	/* fp_func's frame, past the copy */
	put(sy, 40, fsym(sy, "fp_ret"));		/* sp_func's return address, in the copy */
	chain_sample(sy, 64, chain, 2);
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 3);
	assert_int_equal(st, UNWIND_COMPLETE);
	assert_int_equal(fr[1].ip, fsym(sy, "fp_ret"));
	assert_int_equal(fr[2].ip, fsym(sy, "stop_ret"));

	/* Nothing copied at all: the leaf owns no frame pointer, so nothing says where its caller is. */
	chain_sample(sy, 0, chain, 2);
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 1);
	assert_int_equal(st, UNWIND_TRUNCATED);
	unwind_deltas_free(u);
}

/*
 * vfp_func, code without CFI that keeps a frame pointer and moves SP by a register (as V8's built-ins do): stepped
 * by its frame pointer where the chain agrees, its caller checked as a guessed one is; without the chain, or
 * where the chain disagrees, the guess steps it (here the frame-pointer convention, the sweep having lost SP).
 */
static void test_chain_steps_code_without_cfi(void **state)
{
	struct synth *sy = *state;
	struct unwind_deltas *u = deltas_new(NULL);
	struct unwind_frame fr[8];
	enum unwind_status st;
	struct unwind_deltas_stats stats;
	memset(sy->stack, 0, sizeof(sy->stack));
	sy->s.regs[UNWIND_REG_IP] = fsym(sy, "vfp_body");
	sy->s.regs[UNWIND_REG_BP] = FAKE_SP + 64;
	put(sy, 64, FAKE_SP + 128);
	put(sy, 72, fsym(sy, "stop_ret"));
	uint64_t agrees[] = { fsym(sy, "vfp_body"), fsym(sy, "stop_ret") };
	chain_sample(sy, sizeof(sy->stack), agrees, 2);
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 2);
	assert_int_equal(st, UNWIND_COMPLETE);
	assert_int_equal(fr[1].ip, fsym(sy, "stop_ret"));
	unwind_deltas_get_stats(u, &stats);
	assert_int_equal(stats.fp_chain_steps, 1);

	uint64_t disagrees[] = { fsym(sy, "vfp_body"), fsym(sy, "fp_ret") };
	chain_sample(sy, sizeof(sy->stack), disagrees, 2);
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 2);
	assert_int_equal(st, UNWIND_COMPLETE);
	chain_sample(sy, sizeof(sy->stack), NULL, 0);
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 2);
	unwind_deltas_get_stats(u, &stats);
	assert_int_equal(stats.fp_chain_steps, 1);	/* the guess did both */

	/* A caller after no call instruction: the chain read the same word, and vouches for nothing. */
	put(sy, 72, fsym(sy, "leaf"));
	uint64_t bogus[] = { fsym(sy, "vfp_body"), fsym(sy, "leaf") };
	chain_sample(sy, sizeof(sy->stack), bogus, 2);
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 1);
	assert_int_equal(st, UNWIND_TRUNCATED);
	unwind_deltas_get_stats(u, &stats);
	assert_int_equal(stats.fp_chain_steps, 1);
	unwind_deltas_free(u);
}

/* Chains that do not fit the walk are not used; a chain entry whose frame keeps no frame pointer ends it. */
static void test_chain_refused(void **state)
{
	struct synth *sy = *state;
	struct unwind_deltas *u = deltas_new(NULL);
	struct unwind_frame fr[8];
	enum unwind_status st;
	/* Two fp_func frames: the first in the copy, the second's frame pointer past it. */
	sy->s.regs[UNWIND_REG_IP] = fsym(sy, "fp_ret");
	sy->s.regs[UNWIND_REG_BP] = FAKE_SP + 16;
	put(sy, 16, FAKE_SP + 128);
	put(sy, 24, fsym(sy, "fp_ret"));
	uint64_t other_ip[] = { fsym(sy, "sp_body"), fsym(sy, "fp_ret"), fsym(sy, "stop_ret") };
	chain_sample(sy, 64, other_ip, 3);
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 2);
	assert_int_equal(st, UNWIND_TRUNCATED);
	uint64_t disagrees[] = { fsym(sy, "fp_ret"), fsym(sy, "sp_ret"), fsym(sy, "stop_ret") };
	chain_sample(sy, 64, disagrees, 3);
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 2);
	assert_int_equal(st, UNWIND_TRUNCATED);
	uint64_t agrees[] = { fsym(sy, "fp_ret"), fsym(sy, "fp_ret"), fsym(sy, "stop_ret") };
	chain_sample(sy, 64, agrees, 3);
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 3);
	assert_int_equal(st, UNWIND_COMPLETE);

	/* sp_func keeps no frame pointer: the kernel's next entry would skip its caller. */
	uint64_t frameless[] = { fsym(sy, "fp_ret"), fsym(sy, "fp_ret"), fsym(sy, "sp_ret"), fsym(sy, "stop_ret") };
	chain_sample(sy, 64, frameless, 4);
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 3);
	assert_int_equal(fr[2].ip, fsym(sy, "sp_ret"));
	assert_int_equal(st, UNWIND_TRUNCATED);
	/* An entry in no module, or a zero, ends it before. */
	uint64_t nowhere[] = { fsym(sy, "fp_ret"), fsym(sy, "fp_ret"), 0x1234, fsym(sy, "stop_ret") };
	chain_sample(sy, 64, nowhere, 4);
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 2);
	assert_int_equal(st, UNWIND_TRUNCATED);

	/* fp_func sampled between "push %rbp" and "mov %rsp, %rbp", nothing copied: its rule saved rbp at CFA - 16,
	 * but rbp is a frame pointer only if it is that address (the kernel walked from rbp, whatever it held). */
	sy->s.regs[UNWIND_REG_IP] = fsym(sy, "fp_pushed");
	sy->s.regs[UNWIND_REG_BP] = FAKE_SP + 128;
	uint64_t from_leaf[] = { fsym(sy, "fp_pushed"), fsym(sy, "stop_ret") };
	chain_sample(sy, 0, from_leaf, 2);
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 1);
	assert_int_equal(st, UNWIND_TRUNCATED);
	sy->s.regs[UNWIND_REG_BP] = FAKE_SP;
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 2);
	assert_int_equal(fr[1].ip, fsym(sy, "stop_ret"));
	assert_int_equal(st, UNWIND_COMPLETE);
	unwind_deltas_free(u);
}

/* ---- JIT code: walked by frame pointer ------------------------------------------------------------------ */

#define FAKE_JIT 0x7f0000000000ull

/* The fixture, and 64 KiB of JIT code (no file, no table) at FAKE_JIT, with a trampoline of a known shape at
 * FAKE_JIT + 0x8000 (CFA = SP + 16 in its 6 middle bytes). */
#define FAKE_TRAMPOLINE (FAKE_JIT + 0x8000)

static int jit_find_module(void *ctx, uint64_t addr, struct unwind_module *mod)
{
	if (addr >= FAKE_TRAMPOLINE + 4 && addr < FAKE_TRAMPOLINE + 10) {
		*mod = (struct unwind_module){ .start = FAKE_TRAMPOLINE + 4, .end = FAKE_TRAMPOLINE + 10, .jit = true,
					       .jit_cfa_sp = 16 };
		return 0;
	}
	if (addr >= FAKE_JIT && addr < FAKE_JIT + 0x10000) {
		*mod = (struct unwind_module){ .start = addr < FAKE_TRAMPOLINE ? FAKE_JIT : FAKE_TRAMPOLINE + 10,
					       .end = addr < FAKE_TRAMPOLINE ? FAKE_TRAMPOLINE : FAKE_JIT + 0x10000,
					       .jit = true };
		return 0;
	}
	return synth_find_module(ctx, addr, mod);
}

/*
 * JIT function A (sampled) called by JIT function B, called by fp_func (native, an rbp frame with CFI), called
 * by stop_func: A's and B's frames are found through their frame pointers, the native ones through their tables.
 */
static void test_jit_frames(void **state)
{
	struct synth *sy = *state;
	struct unwind_deltas *u = deltas_new(NULL);
	struct unwind_frame fr[8];
	enum unwind_status st;
	sy->proc.find_module = jit_find_module;
	sy->s.regs[UNWIND_REG_IP] = FAKE_JIT + 0x100;
	sy->s.regs[UNWIND_REG_BP] = FAKE_SP + 32;
	put(sy, 32, FAKE_SP + 96);			/* A's frame: B's FP */
	put(sy, 40, FAKE_JIT + 0x2345);			/* ... and the return address into B */
	put(sy, 96, FAKE_SP + 200);			/* B's frame: fp_func's FP */
	put(sy, 104, fsym(sy, "fp_ret"));		/* ... returning into fp_func */
	put(sy, 200, FAKE_SP + 400);			/* fp_func: CFA = FP + 16 */
	put(sy, 208, fsym(sy, "stop_ret"));
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 4);
	assert_int_equal(st, UNWIND_COMPLETE);
	assert_int_equal(fr[1].ip, FAKE_JIT + 0x2345);
	assert_int_equal(fr[2].ip, fsym(sy, "fp_ret"));
	assert_int_equal(fr[3].ip, fsym(sy, "stop_ret"));

	/* Native code called from JIT code: sp_func's table leads back into it, FP untouched, the walk goes on. */
	sy->s.regs[UNWIND_REG_IP] = fsym(sy, "sp_body");
	put(sy, 40, FAKE_JIT + 0x2345);			/* sp_func: CFA = SP + 48 */
	sy->s.regs[UNWIND_REG_BP] = FAKE_SP + 96;	/* B's FP, which sp_func keeps */
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 4);
	assert_int_equal(fr[1].ip, FAKE_JIT + 0x2345);
	assert_int_equal(fr[2].ip, fsym(sy, "fp_ret"));
	assert_int_equal(st, UNWIND_COMPLETE);
	/*
	 * A trampoline without a frame (CPython's: sub $8,%rsp; call; add; ret) between sp_func and fp_func: its
	 * shape, not FP, leads on; FP, untouched by it, is fp_func's own again there.
	 */
	sy->s.regs[UNWIND_REG_BP] = FAKE_SP + 200;
	put(sy, 40, FAKE_TRAMPOLINE + 6);		/* sp_func returns into the trampoline, CFA = SP + 48 */
	put(sy, 56, fsym(sy, "fp_ret"));		/* the trampoline: CFA = SP + 16 */
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 4);
	assert_int_equal(fr[1].ip, FAKE_TRAMPOLINE + 6);
	assert_int_equal(fr[2].ip, fsym(sy, "fp_ret"));
	assert_int_equal(fr[3].ip, fsym(sy, "stop_ret"));
	assert_int_equal(st, UNWIND_COMPLETE);
	put(sy, 56, 0x1234);				/* ... and its return address must be in code too */
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 2);
	assert_int_equal(st, UNWIND_TRUNCATED);
	struct unwind_deltas_stats stats;
	unwind_deltas_get_stats(u, &stats);
	assert_int_equal(stats.jit_steps, 4);
	assert_int_equal(stats.jit_step_failures, 1);
	unwind_deltas_free(u);
}

/* A JVM's code as its code cache describes it (src/processes/hotspot.h): compiled method A (48-byte frame), the
 * interpreter, compiled method B (32-byte frame), a stub that keeps no frame. */
#define JVM_A FAKE_JIT
#define JVM_INTERP (FAKE_JIT + 0x1000)
#define JVM_B (FAKE_JIT + 0x2000)
#define JVM_STUB (FAKE_JIT + 0x3000)
#define JVM_METHOD 0x7e0000001000ULL	/* what the interpreter's frame says it runs */

static int jvm_find_module(void *ctx, uint64_t addr, struct unwind_module *mod)
{
	static const struct { uint64_t start; uint32_t cfa_sp; bool sender_sp; } code[] = {
		{ JVM_A, 48, false }, { JVM_INTERP, 0, true }, { JVM_B, 32, false }, { JVM_STUB, 0, false },
	};
	for (size_t i = 0; i < sizeof(code) / sizeof(code[0]); i++)
		if (addr >= code[i].start && addr < code[i].start + 0x1000) {
			*mod = (struct unwind_module){ .start = code[i].start, .end = code[i].start + 0x1000,
						       .jit = true, .jit_cfa_sp = code[i].cfa_sp,
						       .jit_fp_saved = code[i].cfa_sp != 0,
						       .jit_sender_sp = code[i].sender_sp,
						       .jit_leaf_shapes = !code[i].sender_sp,
						       .jit_frame_word_at = code[i].sender_sp ? 24 : 0,
						       .jit_word_start = code[i].start,
						       .jit_word_end = code[i].start + 0x1000 };
			return 0;
		}
	return synth_find_module(ctx, addr, mod);
}

/* The stack of a walk A -> interpreter -> B -> fp_func -> stop_func, A's frame at SP + off. */
static void jvm_stack(struct synth *sy, uint64_t off)
{
	memset(sy->stack, 0, sizeof(sy->stack));
	put(sy, off + 32, FAKE_SP + 160);		/* A saved the interpreter's FP at CFA - 16 */
	put(sy, off + 40, JVM_INTERP + 0x10);		/* ... and was called from it */
	put(sy, 136, JVM_METHOD);			/* the interpreter: its Method, at FP - 24 */
	put(sy, 152, FAKE_SP + 240);			/* ... its caller's SP, at FP - 8 */
	put(sy, 160, 0x5555);				/* ... B's FP (which B uses as it likes) */
	put(sy, 168, JVM_B + 0x20);			/* ... called from B */
	put(sy, 256, FAKE_SP + 400);			/* B, at the SP the interpreter saved: fp_func's FP */
	put(sy, 264, fsym(sy, "fp_ret"));
	put(sy, 400, FAKE_SP + 480);			/* fp_func: CFA = FP + 16 */
	put(sy, 408, fsym(sy, "stop_ret"));
}

static void expect_jvm_walk(struct synth *sy, struct unwind_deltas *u, uint64_t leaf)
{
	struct unwind_frame fr[8];
	enum unwind_status st;
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 5);
	assert_int_equal(st, UNWIND_COMPLETE);
	assert_int_equal(fr[0].ip, leaf);
	assert_int_equal(fr[1].ip, JVM_INTERP + 0x10);
	assert_int_equal(fr[2].ip, JVM_B + 0x20);
	/* the interpreter's frame says its Method (the word read with its own module's rule, not its caller's) */
	assert_null(fr[1].module);
	assert_int_equal(fr[1].frame_word, JVM_METHOD);
	for (int i = 0; i < 3; i++)
		assert_true(i == 1 || fr[i].module || fr[i].frame_word == 0);
	assert_int_equal(fr[3].ip, fsym(sy, "fp_ret"));
	assert_int_equal(fr[4].ip, fsym(sy, "stop_ret"));
}

/*
 * A JVM without frame pointers: compiled frames stepped by their frame size, the caller's FP restored from
 * CFA - 16; the interpreter by FP, its caller's SP the one it saved (the arguments and locals an adapter pushed
 * lie between its frame and that SP); where the leaf is not as its rule says (an intrinsic's pushed word, an
 * epilogue, a stub without a frame) the other shapes, each checked; never for a caller.
 */
static void test_jvm_frames(void **state)
{
	struct synth *sy = *state;
	struct unwind_deltas *u = deltas_new(NULL);
	struct unwind_frame fr[8];
	enum unwind_status st;
	sy->proc.find_module = jvm_find_module;
	sy->s.regs[UNWIND_REG_IP] = JVM_A + 0x100;
	sy->s.regs[UNWIND_REG_BP] = 0x1234;		/* FP is any value in compiled code */
	jvm_stack(sy, 0);
	expect_jvm_walk(sy, u, JVM_A + 0x100);

	jvm_stack(sy, 8);				/* A sampled with a word of its own pushed */
	expect_jvm_walk(sy, u, JVM_A + 0x100);

	jvm_stack(sy, 0);				/* A's epilogue: popped down to its return address */
	put(sy, 0, JVM_INTERP + 0x10);
	sy->s.regs[UNWIND_REG_BP] = FAKE_SP + 160;	/* ... the interpreter's FP restored */
	put(sy, 40, 0);
	put(sy, 48, JVM_B + 0x20);			/* a caller's return address where the pushed word's
							 * shape looks */
	expect_jvm_walk(sy, u, JVM_A + 0x100);

	sy->s.regs[UNWIND_REG_IP] = JVM_STUB + 0x10;	/* a stub without a frame, called by A */
	sy->s.regs[UNWIND_REG_BP] = FAKE_SP + 160;	/* FP the interpreter's, above A: not the stub's caller */
	jvm_stack(sy, 8);
	put(sy, 0, JVM_A + 0x100);
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 6);
	assert_int_equal(fr[1].ip, JVM_A + 0x100);
	assert_int_equal(fr[2].ip, JVM_INTERP + 0x10);
	assert_int_equal(st, UNWIND_COMPLETE);

	sy->s.regs[UNWIND_REG_IP] = JVM_A + 0x100;
	jvm_stack(sy, 0);
	put(sy, 152, FAKE_SP + 100);			/* the interpreter's saved SP below its frame: refused */
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 2);
	assert_int_equal(st, UNWIND_TRUNCATED);
	jvm_stack(sy, 0);
	put(sy, 264, 0);				/* B's return address not where its size says: B is no leaf */
	put(sy, 272, fsym(sy, "fp_ret"));
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 3);
	assert_int_equal(st, UNWIND_TRUNCATED);
	unwind_deltas_free(u);
}

/* A step through JIT code is taken only where it is plausible; else the walk ends there, truncated. */
static void test_jit_steps_refused(void **state)
{
	struct synth *sy = *state;
	struct unwind_deltas *u = deltas_new(NULL);
	struct unwind_frame fr[8];
	enum unwind_status st;
	struct {
		uint64_t fp, ra;
		const char *why;
	} cases[] = {
		{ FAKE_SP - 16, FAKE_JIT + 0x10, "FP below SP" },
		{ FAKE_SP + 33, FAKE_JIT + 0x10, "FP not 8-aligned" },
		{ FAKE_SP + sizeof(sy->stack), FAKE_JIT + 0x10, "FP past the stack" },
		{ FAKE_SP + 0x200000, FAKE_JIT + 0x10, "FP more than 1 MiB above SP" },
		{ FAKE_SP + 32, 0, "zero return address" },
		{ FAKE_SP + 32, 0x1234, "return address in no code" },
		{ FAKE_SP + 32, FAKE_BIAS + 1, "return address in a file where its table has no code" },
		{ FAKE_SP + 32, fsym(sy, "leaf"), "return address in a file's code, after no call instruction" },
	};
	sy->proc.find_module = jit_find_module;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		sy->s.regs[UNWIND_REG_IP] = FAKE_JIT + 0x100;
		sy->s.regs[UNWIND_REG_BP] = cases[i].fp;
		put(sy, 32, FAKE_SP + 96);
		put(sy, 40, cases[i].ra);
		print_message("  %s\n", cases[i].why);
		assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 1);
		assert_int_equal(st, UNWIND_TRUNCATED);
	}
	/* A JIT caller whose FP is below its SP (the step went up, its FP did not): refused at that frame. */
	sy->s.regs[UNWIND_REG_BP] = FAKE_SP + 32;
	put(sy, 32, FAKE_SP + 40);
	put(sy, 40, FAKE_JIT + 0x2345);
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 2);
	assert_int_equal(st, UNWIND_TRUNCATED);
	struct unwind_deltas_stats stats;
	unwind_deltas_get_stats(u, &stats);
	assert_int_equal(stats.jit_steps, 1);
	assert_int_equal(stats.jit_step_failures, sizeof(cases) / sizeof(cases[0]) + 1);
	assert_int_equal(stats.implausible_callers, 0);

	/*
	 * Native code without CFI (frameless_body: its rule guessed) returning into JIT code: a guessed caller is
	 * kept only after a call instruction, and JIT code has no image to check that in: refused, counted.
	 */
	sy->s.regs[UNWIND_REG_IP] = fsym(sy, "frameless_body");
	put(sy, 24, FAKE_JIT + 0x2345);
	assert_int_equal(synth_unwind(sy, u, fr, 8, &st), 1);
	assert_int_equal(st, UNWIND_TRUNCATED);
	unwind_deltas_get_stats(u, &stats);
	assert_int_equal(stats.implausible_callers, 1);
	assert_int_equal(stats.jit_steps, 1);
	unwind_deltas_free(u);
}

int main(void)
{
	const struct CMUnitTest real[] = {
		cmocka_unit_test(test_chain_to_main),
		cmocka_unit_test(test_prebuilt_tables),
		cmocka_unit_test(test_max_frames),
		cmocka_unit_test(test_thread_to_clone),
		cmocka_unit_test(test_signal_frame),
		cmocka_unit_test(test_deep_recursion_truncated),
		cmocka_unit_test(test_stack_extension),
		cmocka_unit_test(test_garbage_never_crashes),
		cmocka_unit_test(test_speed_and_cache),
	};
	const struct CMUnitTest synthetic[] = {
		cmocka_unit_test_setup_teardown(test_synth_sp_fp_stop, synth_setup, synth_teardown),
		cmocka_unit_test_setup_teardown(test_synth_plt, synth_setup, synth_teardown),
		cmocka_unit_test_setup_teardown(test_synth_drap, synth_setup, synth_teardown),
		cmocka_unit_test_setup_teardown(test_synth_signal, synth_setup, synth_teardown),
		cmocka_unit_test_setup_teardown(test_synth_guessed_callers, synth_setup, synth_teardown),
		cmocka_unit_test_setup_teardown(test_synth_fallback, synth_setup, synth_teardown),
		cmocka_unit_test_setup_teardown(test_chain_after_copy, synth_setup, synth_teardown),
		cmocka_unit_test_setup_teardown(test_chain_frameless_leaf, synth_setup, synth_teardown),
		cmocka_unit_test_setup_teardown(test_chain_refused, synth_setup, synth_teardown),
		cmocka_unit_test_setup_teardown(test_chain_steps_code_without_cfi, synth_setup, synth_teardown),
		cmocka_unit_test_setup_teardown(test_jit_frames, synth_setup, synth_teardown),
		cmocka_unit_test_setup_teardown(test_jit_steps_refused, synth_setup, synth_teardown),
		cmocka_unit_test_setup_teardown(test_jvm_frames, synth_setup, synth_teardown),
	};
	int failed = cmocka_run_group_tests_name("real samples", real, group_setup, group_teardown);
	return failed + cmocka_run_group_tests_name("synthetic samples", synthetic, NULL, NULL);
}
