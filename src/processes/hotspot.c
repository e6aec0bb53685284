/*
 * hotspot.c — a running JVM's code cache read through its VMStructs (hotspot.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "src/processes/hotspot.h"

const char *const hotspot_global_names[HOTSPOT_NGLOBALS] = {
	[HOTSPOT_GLOBAL_STRUCTS] = "gHotSpotVMStructs",
	[HOTSPOT_GLOBAL_STRUCT_STRIDE] = "gHotSpotVMStructEntryArrayStride",
	[HOTSPOT_GLOBAL_STRUCT_TYPE_NAME] = "gHotSpotVMStructEntryTypeNameOffset",
	[HOTSPOT_GLOBAL_STRUCT_FIELD_NAME] = "gHotSpotVMStructEntryFieldNameOffset",
	[HOTSPOT_GLOBAL_STRUCT_OFFSET] = "gHotSpotVMStructEntryOffsetOffset",
	[HOTSPOT_GLOBAL_STRUCT_ADDRESS] = "gHotSpotVMStructEntryAddressOffset",
	[HOTSPOT_GLOBAL_TYPES] = "gHotSpotVMTypes",
	[HOTSPOT_GLOBAL_TYPE_STRIDE] = "gHotSpotVMTypeEntryArrayStride",
	[HOTSPOT_GLOBAL_TYPE_NAME] = "gHotSpotVMTypeEntryTypeNameOffset",
	[HOTSPOT_GLOBAL_TYPE_SIZE] = "gHotSpotVMTypeEntrySizeOffset",
};

/* The fields read from the VMStructs table: a static field's address, another's offset in its type. */
enum field {
	F_HEAPS,		/* CodeCache::_heaps (static): GrowableArray<CodeHeap*>* */
	F_ARRAY_LEN, F_ARRAY_DATA,
	F_HEAP_MEMORY, F_HEAP_SEGMAP, F_HEAP_LOG2,
	F_SPACE_LOW, F_SPACE_HIGH_BOUNDARY,
	F_BLOCK_LENGTH, F_BLOCK_USED,
	F_BLOB_CODE_BEGIN, F_BLOB_CODE_END, F_BLOB_FRAME_SIZE, F_BLOB_FRAME_COMPLETE, F_BLOB_NAME,
	NWALK_FIELDS,		/* the fields above walk frames; those below name compiled methods */
	F_COMPILED_METHOD = NWALK_FIELDS, F_METHOD_CONST, F_CONST_POOL, F_CONST_NAME_INDEX, F_POOL_HOLDER,
	F_POOL_LENGTH, F_KLASS_NAME, F_SYMBOL_LENGTH, F_SYMBOL_BODY,
	NFIELDS
};

static const struct { const char *type, *field; } field_names[NFIELDS] = {
	[F_HEAPS] = { "CodeCache", "_heaps" },
	[F_ARRAY_LEN] = { "GrowableArrayBase", "_len" },
	[F_ARRAY_DATA] = { "GrowableArray<int>", "_data" },
	[F_HEAP_MEMORY] = { "CodeHeap", "_memory" },
	[F_HEAP_SEGMAP] = { "CodeHeap", "_segmap" },
	[F_HEAP_LOG2] = { "CodeHeap", "_log2_segment_size" },
	[F_SPACE_LOW] = { "VirtualSpace", "_low" },
	[F_SPACE_HIGH_BOUNDARY] = { "VirtualSpace", "_high_boundary" },
	[F_BLOCK_LENGTH] = { "HeapBlock::Header", "_length" },
	[F_BLOCK_USED] = { "HeapBlock::Header", "_used" },
	[F_BLOB_CODE_BEGIN] = { "CodeBlob", "_code_begin" },
	[F_BLOB_CODE_END] = { "CodeBlob", "_code_end" },
	[F_BLOB_FRAME_SIZE] = { "CodeBlob", "_frame_size" },
	[F_BLOB_FRAME_COMPLETE] = { "CodeBlob", "_frame_complete_offset" },
	[F_BLOB_NAME] = { "CodeBlob", "_name" },
	[F_COMPILED_METHOD] = { "CompiledMethod", "_method" },
	[F_METHOD_CONST] = { "Method", "_constMethod" },
	[F_CONST_POOL] = { "ConstMethod", "_constants" },
	[F_CONST_NAME_INDEX] = { "ConstMethod", "_name_index" },
	[F_POOL_HOLDER] = { "ConstantPool", "_pool_holder" },
	[F_POOL_LENGTH] = { "ConstantPool", "_length" },
	[F_KLASS_NAME] = { "Klass", "_name" },
	[F_SYMBOL_LENGTH] = { "Symbol", "_length" },
	[F_SYMBOL_BODY] = { "Symbol", "_body" },
};

enum type { T_HEAP_BLOCK, T_CODE_BLOB, NWALK_TYPES, T_CONSTANT_POOL = NWALK_TYPES, NTYPES };
static const char *const type_names[NTYPES] = { [T_HEAP_BLOCK] = "HeapBlock", [T_CODE_BLOB] = "CodeBlob",
						[T_CONSTANT_POOL] = "ConstantPool" };

/* Bounds on what the process says. A JDK 17 table has ~800 entries of 48 bytes; names are short. */
#define ENTRIES_MAX 20000
#define STRIDE_MAX 256
#define NAME_MAX_LEN 64
#define HEAPS_MAX 8		/* the segmented code cache has 3 */
#define HEADER_MAX 1024		/* a HeapBlock's or a CodeBlob's bytes read (CodeBlob: 104 in JDK 17) */
#define HOPS_MAX 65536		/* through the segment map: 255 segments a hop at most */
#define HEAPS_RETRY_NS 100000000ULL
#define CACHE_SLOTS 4096	/* a power of two */
#define CACHE_LINE_BITS 6
#define BLOBS_MAX 1024		/* blobs kept by their code's range: a JVM's hot code is a few hundred */

struct code_heap {
	uint64_t low, high_boundary, segmap;
	unsigned log2;
};

struct cached_frame {
	uint64_t line, addr, at_ns;
	struct hotspot_frame frame;
	int err;
};

/* What a code blob's frames are found from, as read at at_ns: its code [begin, end) and its frame's shape. */
struct blob {
	uint64_t begin, end, at_ns;
	uint64_t addr;		/* the CodeBlob */
	int32_t words;		/* frame size; 0: no frame of its own */
	int32_t complete;	/* frame-complete offset; < 0: never complete */
	bool interpreter;
};

struct hotspot {
	struct unwind_memory mem;
	uint64_t field[NFIELDS];
	uint64_t type_size[NTYPES];
	bool names;		/* the fields that name compiled methods were all found */
	bool gone;		/* the process exited: nothing is read any more (hotspot_process_gone) */
	struct code_heap heaps[HEAPS_MAX];
	unsigned nheaps;
	uint64_t heaps_tried_ns;
	struct cached_frame cache[CACHE_SLOTS];
	/* Blobs met, ordered by code: the lines of one blob are found from one read of it (a miss of the cache
	 * above costs two reads, and a JVM's hot code spans hundreds of lines). */
	struct blob blobs[BLOBS_MAX];
	unsigned nblobs;
};

/* ---- reading the process ---- */

static int read_u64(const struct unwind_memory *mem, uint64_t addr, uint64_t *v)
{
	return unwind_memory_read_exact(mem, addr, v, sizeof(*v));
}

/* A NUL-terminated string of at most NAME_MAX_LEN - 1 bytes at addr into buf; -EINVAL when longer. */
static int read_name(const struct unwind_memory *mem, uint64_t addr, char buf[NAME_MAX_LEN])
{
	ssize_t n = addr ? mem->read(mem->ctx, addr, buf, NAME_MAX_LEN) : -EFAULT;
	if (n <= 0)
		return n < 0 ? (int)n : -EFAULT;
	return memchr(buf, '\0', (size_t)n) ? 0 : -EINVAL;
}

/* A field of a structure read whole into bytes (size bytes): an integer of width bytes at off. */
static uint64_t field_at(const uint8_t *bytes, size_t size, uint64_t off, size_t width)
{
	uint64_t v = 0;
	if (off <= size && width <= size - off)
		memcpy(&v, bytes + off, width);	/* little-endian x86_64 */
	return v;
}

/* Two fields of the structure at base, at offsets a and b (widths wa, wb), in one read of the bytes from the
 * first to the end of the last (within HEADER_MAX): a name's reads are a syscall each. */
static int read_two(struct hotspot *h, uint64_t base, uint64_t a, size_t wa, uint64_t *va, uint64_t b, size_t wb,
		    uint64_t *vb)
{
	uint8_t bytes[HEADER_MAX];
	uint64_t lo = a < b ? a : b, end = a + wa > b + wb ? a + wa : b + wb;
	if (end - lo > sizeof(bytes) || base > UINT64_MAX - end)
		return -EINVAL;
	int err = unwind_memory_read_exact(&h->mem, base + lo, bytes, end - lo);
	if (err)
		return err;
	*va = field_at(bytes, end - lo, a - lo, wa);
	*vb = field_at(bytes, end - lo, b - lo, wb);
	return 0;
}

/* ---- the VMStructs tables ---- */

/* Where a table is and how its entries are laid out: the offsets of two name pointers and two values. */
struct table {
	uint64_t base, stride, name_off, field_off, value_off, address_off;
};

/* An entry's type name, read once per distinct pointer (the compiler shares each literal). */
struct name_memo {
	uint64_t ptr;
	char name[NAME_MAX_LEN];
	bool ok;
};

static const char *entry_name(const struct unwind_memory *mem, uint64_t ptr, struct name_memo *memo)
{
	if (ptr != memo->ptr) {
		memo->ptr = ptr;
		memo->ok = read_name(mem, ptr, memo->name) == 0;
	}
	return memo->ok ? memo->name : NULL;
}

/* What one table entry gives (its type name read): the bits of the wanted fields or types it was. */
typedef uint32_t (*entry_fn)(struct hotspot *h, const struct table *t, const uint8_t *entry, const char *type);

/* Each entry of table t up to its end (a null type name), until all of want was found. Returns what was found (a
 * bit each) or a negative errno. */
static int64_t read_entries(struct hotspot *h, const struct table *t, uint32_t want, entry_fn fn)
{
	struct name_memo memo = { 0 };
	uint32_t found = 0;
	uint8_t entry[STRIDE_MAX];
	for (unsigned i = 0; i < ENTRIES_MAX && found != want; i++) {
		int err = unwind_memory_read_exact(&h->mem, t->base + i * t->stride, entry, t->stride);
		if (err)
			return err;
		uint64_t type_ptr = field_at(entry, t->stride, t->name_off, 8);
		if (!type_ptr)
			break;	/* the table's end */
		const char *type = entry_name(&h->mem, type_ptr, &memo);
		if (type)
			found |= fn(h, t, entry, type);
	}
	return found;
}

/* A struct entry: a wanted field's offset in its type, or a static one's address. */
static uint32_t struct_entry(struct hotspot *h, const struct table *t, const uint8_t *entry, const char *type)
{
	char field[NAME_MAX_LEN];
	bool named = false;
	uint32_t found = 0;
	for (unsigned f = 0; f < NFIELDS; f++) {
		if (strcmp(field_names[f].type, type))
			continue;
		if (!named && read_name(&h->mem, field_at(entry, t->stride, t->field_off, 8), field))
			break;
		named = true;
		if (strcmp(field_names[f].field, field))
			continue;
		h->field[f] = field_at(entry, t->stride, f == F_HEAPS ? t->address_off : t->value_off, 8);
		found |= 1u << f;
	}
	return found;
}

/* A type entry: a wanted type's size. */
static uint32_t type_entry(struct hotspot *h, const struct table *t, const uint8_t *entry, const char *type)
{
	for (unsigned k = 0; k < NTYPES; k++)
		if (strcmp(type_names[k], type) == 0) {
			h->type_size[k] = field_at(entry, t->stride, t->value_off, 8);
			return 1u << k;
		}
	return 0;
}

/* The globals' values; each offset within its table's stride, the stride within STRIDE_MAX. */
static int read_tables(struct hotspot *h, const uint64_t globals[HOTSPOT_NGLOBALS], struct table *structs,
		       struct table *types)
{
	uint64_t v[HOTSPOT_NGLOBALS];
	for (unsigned i = 0; i < HOTSPOT_NGLOBALS; i++) {
		int err = read_u64(&h->mem, globals[i], &v[i]);
		if (err)
			return err;
	}
	*structs = (struct table){ v[HOTSPOT_GLOBAL_STRUCTS], v[HOTSPOT_GLOBAL_STRUCT_STRIDE],
				   v[HOTSPOT_GLOBAL_STRUCT_TYPE_NAME], v[HOTSPOT_GLOBAL_STRUCT_FIELD_NAME],
				   v[HOTSPOT_GLOBAL_STRUCT_OFFSET], v[HOTSPOT_GLOBAL_STRUCT_ADDRESS] };
	*types = (struct table){ v[HOTSPOT_GLOBAL_TYPES], v[HOTSPOT_GLOBAL_TYPE_STRIDE], v[HOTSPOT_GLOBAL_TYPE_NAME],
				 0, v[HOTSPOT_GLOBAL_TYPE_SIZE], 0 };
	const struct table *all[] = { structs, types };
	for (unsigned i = 0; i < 2; i++) {
		const struct table *t = all[i];
		if (!t->base || t->stride < 8 || t->stride > STRIDE_MAX || t->name_off > t->stride - 8 ||
		    t->field_off > t->stride - 8 || t->value_off > t->stride - 8 || t->address_off > t->stride - 8)
			return -EINVAL;
	}
	return 0;
}

int hotspot_open(const struct unwind_memory *mem, const uint64_t globals[HOTSPOT_NGLOBALS], struct hotspot **out)
{
	struct table structs, types;
	struct hotspot *h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->mem = *mem;
	int64_t fields = 0, sizes = 0;
	int err = read_tables(h, globals, &structs, &types);
	if (!err && (fields = read_entries(h, &structs, (1u << NFIELDS) - 1, struct_entry)) < 0)
		err = (int)fields;
	if (!err && (sizes = read_entries(h, &types, (1u << NTYPES) - 1, type_entry)) < 0)
		err = (int)sizes;
	if (!err && ((fields & ((1u << NWALK_FIELDS) - 1)) != (1u << NWALK_FIELDS) - 1 ||
		     (sizes & ((1u << NWALK_TYPES) - 1)) != (1u << NWALK_TYPES) - 1))
		err = -ENOENT;	/* a JVM whose structures are not laid out as this reader knows */
	if (!err && (h->type_size[T_HEAP_BLOCK] > HEADER_MAX || h->type_size[T_CODE_BLOB] > HEADER_MAX ||
		     h->field[F_HEAP_LOG2] > 4096 || h->field[F_BLOCK_USED] >= h->type_size[T_HEAP_BLOCK]))
		err = -EINVAL;
	h->names = !err && fields == (1u << NFIELDS) - 1 && sizes == (1u << NTYPES) - 1 &&
		   h->type_size[T_CONSTANT_POOL] <= HEADER_MAX;
	if (err) {
		free(h);
		return err;
	}
	*out = h;
	return 0;
}

void hotspot_free(struct hotspot *h)
{
	free(h);
}

/* ---- the code heaps ---- */

/* One code heap's bounds and segment map, from the CodeHeap at addr. */
static int read_heap(struct hotspot *h, uint64_t addr, struct code_heap *out)
{
	const uint64_t *f = h->field;
	uint64_t log2 = 0;
	int err = read_u64(&h->mem, addr + f[F_HEAP_MEMORY] + f[F_SPACE_LOW], &out->low);
	if (!err)
		err = read_u64(&h->mem, addr + f[F_HEAP_MEMORY] + f[F_SPACE_HIGH_BOUNDARY], &out->high_boundary);
	if (!err)
		err = read_u64(&h->mem, addr + f[F_HEAP_SEGMAP] + f[F_SPACE_LOW], &out->segmap);
	if (!err)
		err = unwind_memory_read_exact(&h->mem, addr + f[F_HEAP_LOG2], &log2, 4);
	if (err)
		return err;
	out->log2 = (unsigned)log2;
	return out->low < out->high_boundary && out->segmap && out->log2 >= 4 && out->log2 <= 16 ? 0 : -EINVAL;
}

/* CodeCache::_heaps, read once the JVM has made them (retried every HEAPS_RETRY_NS until then). */
static int read_heaps(struct hotspot *h, uint64_t now_ns)
{
	uint64_t array, data;
	int32_t len = 0;
	if (h->nheaps)
		return 0;
	if (h->heaps_tried_ns && now_ns - h->heaps_tried_ns < HEAPS_RETRY_NS)
		return -EAGAIN;
	h->heaps_tried_ns = now_ns ? now_ns : 1;
	int err = read_u64(&h->mem, h->field[F_HEAPS], &array);
	if (!err && !array)
		return -EAGAIN;
	if (!err)
		err = unwind_memory_read_exact(&h->mem, array + h->field[F_ARRAY_LEN], &len, sizeof(len));
	if (!err)
		err = read_u64(&h->mem, array + h->field[F_ARRAY_DATA], &data);
	if (err)
		return err;
	if (len <= 0)
		return -EAGAIN;
	if (len > HEAPS_MAX)
		return -EINVAL;
	for (int i = 0; i < len; i++) {
		uint64_t heap;
		if ((err = read_u64(&h->mem, data + 8 * (uint64_t)i, &heap)) ||
		    (err = read_heap(h, heap, &h->heaps[i])))
			return err;
	}
	h->nheaps = (unsigned)len;
	return 0;
}

/* The first segment of the block holding segment idx of heap c: back through the segment map. */
static int block_start(struct hotspot *h, const struct code_heap *c, uint64_t *idx)
{
	uint8_t map[256];
	uint64_t base = UINT64_MAX, i = *idx;
	for (unsigned hops = 0; hops < HOPS_MAX; hops++) {
		if (base == UINT64_MAX || i < base) {
			base = i >= 255 ? i - 255 : 0;
			int err = unwind_memory_read_exact(&h->mem, c->segmap + base, map, i - base + 1);
			if (err)
				return err;
		}
		uint8_t b = map[i - base];
		if (b == 0xff)
			return -ENOENT;	/* a free segment */
		if (b == 0) {
			*idx = i;
			return 0;
		}
		if (b > i)
			return -EINVAL;
		i -= b;
	}
	return -EINVAL;
}

/* The rule of blob b at addr in its code. */
static void blob_rule(const struct blob *b, uint64_t addr, struct hotspot_frame *out)
{
	if (b->words == 0) {
		*out = (struct hotspot_frame){ .start = b->begin, .end = b->end, .sender_sp = b->interpreter,
					       .leaf_shapes = !b->interpreter };
	} else if (b->complete >= 0 && addr - b->begin < (uint64_t)b->complete) {
		*out = (struct hotspot_frame){ .start = b->begin, .end = b->begin + (uint64_t)b->complete, .cfa_sp = 8,
					       .leaf_shapes = true };	/* the prologue */
	} else {
		*out = (struct hotspot_frame){ .start = b->complete >= 0 ? b->begin + (uint64_t)b->complete : b->begin,
					       .end = b->end, .cfa_sp = (uint32_t)b->words * 8, .fp_saved = true,
					       .leaf_shapes = true };
	}
	out->blob = b->addr;
	out->code_begin = b->begin;
	out->code_end = b->end;
}

/* The blob whose block starts at block, holding addr in its code. */
static int read_blob(struct hotspot *h, const struct code_heap *c, uint64_t block, uint64_t addr, struct blob *out)
{
	const uint64_t *f = h->field;
	uint8_t bytes[2 * HEADER_MAX];	/* the block's header, then the blob's: one read */
	size_t hsize = h->type_size[T_HEAP_BLOCK], bsize = h->type_size[T_CODE_BLOB];
	const uint8_t *hdr = bytes, *blob = bytes + hsize;
	int err = unwind_memory_read_exact(&h->mem, block, bytes, hsize + bsize);
	if (err)
		return err;
	uint64_t segs = field_at(hdr, hsize, f[F_BLOCK_LENGTH], 8);
	if (!field_at(hdr, hsize, f[F_BLOCK_USED], 1) || !segs || segs > (c->high_boundary - block) >> c->log2)
		return -ENOENT;
	uint64_t end = block + (segs << c->log2), begin = field_at(blob, bsize, f[F_BLOB_CODE_BEGIN], 8),
		 code_end = field_at(blob, bsize, f[F_BLOB_CODE_END], 8);
	int32_t words = (int32_t)field_at(blob, bsize, f[F_BLOB_FRAME_SIZE], 4),
		complete = (int32_t)field_at(blob, bsize, f[F_BLOB_FRAME_COMPLETE], 4);
	if (begin < block + hsize + bsize || code_end > end || addr < begin || addr >= code_end)
		return addr < end ? -EINVAL : -ENOENT;
	if (words < 0 || (uint64_t)words * 8 > HOTSPOT_FRAME_MAX ||
	    (complete >= 0 && (uint64_t)complete >= code_end - begin))
		return -EINVAL;
	char name[NAME_MAX_LEN];
	bool interpreter = words == 0 && read_name(&h->mem, field_at(blob, bsize, f[F_BLOB_NAME], 8), name) == 0 &&
			   strcmp(name, "Interpreter") == 0;
	*out = (struct blob){ .begin = begin, .end = code_end, .addr = block + hsize, .words = words,
			      .complete = complete, .interpreter = interpreter };
	return 0;
}

/* The first blob whose code ends after addr (nblobs: none). */
static unsigned blob_after(const struct hotspot *h, uint64_t addr)
{
	unsigned lo = 0, hi = h->nblobs;
	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;
		if (h->blobs[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The blob met whose code holds addr, or NULL; within HOTSPOT_CACHE_NS of now_ns unless any_age. */
static const struct blob *known_blob(const struct hotspot *h, uint64_t addr, uint64_t now_ns, bool any_age)
{
	unsigned i = blob_after(h, addr);
	const struct blob *b = i < h->nblobs ? &h->blobs[i] : NULL;
	return b && addr >= b->begin && (any_age || now_ns - b->at_ns < HOTSPOT_CACHE_NS) ? b : NULL;
}

/* Keep b, read at now_ns, in place of the blobs whose code it overlaps (code freed and reused); when full, in place
 * of the one read longest ago. */
static void keep_blob(struct hotspot *h, struct blob b, uint64_t now_ns)
{
	b.at_ns = now_ns;
	unsigned first = blob_after(h, b.begin), last = first;
	while (last < h->nblobs && h->blobs[last].begin < b.end)
		last++;
	if (first == last && h->nblobs == BLOBS_MAX) {
		unsigned old = 0;
		for (unsigned i = 1; i < h->nblobs; i++)
			old = h->blobs[i].at_ns < h->blobs[old].at_ns ? i : old;
		memmove(&h->blobs[old], &h->blobs[old + 1], (h->nblobs - old - 1) * sizeof(b));
		h->nblobs--;
		first = last = blob_after(h, b.begin);
	}
	/* [first, last) gives way to b: one slot where there were last - first */
	unsigned tail = h->nblobs - last;
	memmove(&h->blobs[first + 1], &h->blobs[last], tail * sizeof(b));
	h->blobs[first] = b;
	h->nblobs = first + 1 + tail;
}

/* The frame at addr: from a blob met recently (0), or read from the process (1); *read_ns: when its blob was read
 * (the frame is believed for HOTSPOT_CACHE_NS from then, not from now). */
static int find_frame(struct hotspot *h, uint64_t addr, uint64_t now_ns, struct hotspot_frame *out,
		      uint64_t *read_ns)
{
	const struct blob *known = known_blob(h, addr, now_ns, false);
	*read_ns = known ? known->at_ns : now_ns;
	if (known) {
		blob_rule(known, addr, out);
		return 0;
	}
	int err = read_heaps(h, now_ns);
	if (err)
		return err;
	for (unsigned i = 0; i < h->nheaps; i++) {
		const struct code_heap *c = &h->heaps[i];
		if (addr < c->low || addr >= c->high_boundary)
			continue;
		uint64_t idx = (addr - c->low) >> c->log2;
		struct blob b;
		if ((err = block_start(h, c, &idx)) || (err = read_blob(h, c, c->low + (idx << c->log2), addr, &b)))
			return err;
		keep_blob(h, b, now_ns);
		blob_rule(&b, addr, out);
		return 1;
	}
	return -ENOENT;
}

/* The frame of a blob met, or else the newest frame the cache holds whose code range holds addr, at any age: for a
 * process that is gone, whose code can no longer change (the last samples of a command are walked after it
 * exited). */
static bool cached_range(const struct hotspot *h, uint64_t addr, struct hotspot_frame *out)
{
	const struct blob *known = known_blob(h, addr, 0, true);
	if (known) {
		blob_rule(known, addr, out);
		return true;
	}
	const struct cached_frame *best = NULL;
	for (size_t i = 0; i < CACHE_SLOTS; i++) {
		const struct cached_frame *e = &h->cache[i];
		bool holds = e->at_ns && !e->err && addr >= e->frame.start && addr < e->frame.end;
		if (holds && (!best || e->at_ns > best->at_ns))
			best = e;
	}
	if (best)
		*out = best->frame;
	return best != NULL;
}

void hotspot_process_gone(struct hotspot *h)
{
	h->gone = true;
}

/* Cached by the 64-byte line of code of the address: a hit is an entry of the same line whose frame's code holds the
 * address, or which found none at that very address. */
int hotspot_frame(struct hotspot *h, uint64_t addr, uint64_t now_ns, struct hotspot_frame *out)
{
	uint64_t line = addr >> CACHE_LINE_BITS;
	if (h->gone)
		return cached_range(h, addr, out) ? 0 : -ESRCH;
	struct cached_frame *e = &h->cache[(line * 0x9e3779b97f4a7c15ULL) >> 52 & (CACHE_SLOTS - 1)];
	bool hit = e->line == line && e->at_ns && now_ns - e->at_ns < HOTSPOT_CACHE_NS &&
		   (e->err ? e->addr == addr : addr >= e->frame.start && addr < e->frame.end);
	if (hit) {
		if (!e->err)
			*out = e->frame;
		return e->err;
	}
	struct hotspot_frame f = { 0 };
	uint64_t read_ns;
	int rc = find_frame(h, addr, now_ns, &f, &read_ns), err = rc < 0 ? rc : 0;
	if (err == -ESRCH) {
		h->gone = true;	/* no more reads: another process may get the pid */
		return cached_range(h, addr, out) ? 0 : err;
	}
	*e = (struct cached_frame){ .line = line, .addr = addr, .at_ns = err == -EAGAIN ? 0 : read_ns ? read_ns : 1,
				    .frame = f, .err = err };
	if (!err)
		*out = f;
	return rc;
}

/* ---- names ---- */

/* A Symbol's text (a class or method name, modified UTF-8) at sym into buf[0..len), '/' made '.'; its length. */
static int read_symbol(struct hotspot *h, uint64_t sym, bool text_only, char *buf, size_t len)
{
	/* its length and as much of its body as buf holds in one read; the rest of the body, if any, then */
	uint8_t bytes[HEADER_MAX];
	uint64_t len_at = h->field[F_SYMBOL_LENGTH], body_at = h->field[F_SYMBOL_BODY];
	size_t want = body_at > len_at && body_at - len_at < 64 ? (size_t)(body_at - len_at) + len : 0;
	want = want < sizeof(bytes) ? want : sizeof(bytes);
	ssize_t got = sym && want ? h->mem.read(h->mem.ctx, sym + len_at, bytes, want) : 0;
	uint16_t n = 0;
	int err = 0;
	if (got >= 2)
		memcpy(&n, bytes, sizeof(n));
	else
		err = sym ? unwind_memory_read_exact(&h->mem, sym + len_at, &n, sizeof(n)) : -EFAULT;
	if (err)
		return err;
	if (n == 0 || n >= len)
		return -EINVAL;
	if (got >= 2 && (uint64_t)got >= body_at - len_at + n)
		memcpy(buf, bytes + (body_at - len_at), n);
	else if ((err = unwind_memory_read_exact(&h->mem, sym + body_at, buf, n)))
		return err;
	for (size_t i = 0; i < n; i++) {
		if (text_only && (unsigned char)buf[i] < 0x20)
			return -EINVAL;	/* a name may, but rarely does: believed of a Method a blob holds only */
		buf[i] = buf[i] == '/' ? '.' : buf[i];
	}
	buf[n] = '\0';
	return n;
}

/* A method's "package.Class.method": Method -> ConstMethod -> its constant pool's holder's name, and the pool's
 * symbol at the method's name index. text_only: method is a word from a stack, and names with control bytes are
 * taken for garbage. */
static int method_name(struct hotspot *h, uint64_t method, bool text_only, char *buf, size_t len)
{
	const uint64_t *f = h->field;
	uint64_t cm, pool, holder, klass_name, name_sym, index = 0, pool_len = 0;
	int err = method && !(method & 7) ? 0 : -EINVAL;
	if (!err && !(err = read_u64(&h->mem, method + f[F_METHOD_CONST], &cm)) &&
	    !(err = read_two(h, cm, f[F_CONST_POOL], 8, &pool, f[F_CONST_NAME_INDEX], 2, &index)) &&
	    !(err = read_two(h, pool, f[F_POOL_LENGTH], 4, &pool_len, f[F_POOL_HOLDER], 8, &holder)) &&
	    !(err = read_u64(&h->mem, holder + f[F_KLASS_NAME], &klass_name)))
		err = index && index < (uint32_t)pool_len && (int32_t)pool_len > 0 ?
			read_u64(&h->mem, pool + h->type_size[T_CONSTANT_POOL] + 8u * index, &name_sym) : -EINVAL;
	int n = err ? err : read_symbol(h, klass_name, text_only, buf, len);
	if (n < 0 || (size_t)n + 2 >= len)
		return n < 0 ? n : -EINVAL;
	buf[n] = '.';
	int m = read_symbol(h, name_sym, text_only, buf + n + 1, len - (size_t)n - 1);
	return m < 0 ? m : n + 1 + m;
}

int hotspot_blob_name(struct hotspot *h, const struct hotspot_frame *frame, char *buf, size_t len)
{
	char name[NAME_MAX_LEN];
	uint64_t name_ptr;
	if (h->gone)
		return -ESRCH;
	int err = read_u64(&h->mem, frame->blob + h->field[F_BLOB_NAME], &name_ptr);
	if (!err)
		err = read_name(&h->mem, name_ptr, name);
	if (err)
		return err;
	if (strcmp(name, "nmethod") == 0) {
		uint64_t method;
		if (!h->names)
			return -ENOENT;
		return (err = read_u64(&h->mem, frame->blob + h->field[F_COMPILED_METHOD], &method)) ? err :
			method_name(h, method, false, buf, len);
	}
	size_t n = strlen(name);
	if (n >= len)
		return -EINVAL;
	memcpy(buf, name, n + 1);
	return (int)n;
}

int hotspot_method_name(struct hotspot *h, uint64_t method, char *buf, size_t len)
{
	if (h->gone)
		return -ESRCH;
	return h->names ? method_name(h, method, true, buf, len) : -ENOENT;
}
