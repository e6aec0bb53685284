/*
 * msgpack_read.c — profile_read_file(): a msgpack profile (msgpack_schema.h; man/hostprof-profile.5) read back
 * into the model, decoding each top-level map into a scratch profile that keeps the file's indices, checking
 * every index, then merging it into the result.
 *
 * Input is untrusted: every object is size-checked before msgpack-c sees it (msgpack_scan.h), every index is
 * checked against its table, and every failure is a negative errno with a one-line message. Not thread-safe.
 */
#include "src/profile/profile.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <msgpack.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "src/base/escape.h"
#include "src/base/msgpack_scan.h"
#include "src/base/read_file.h"
#include "src/base/regular_file.h"
#include "src/profile/msgpack_schema.h"
#include "src/profile/profile_impl.h"


/* A decoded attribute-table entry, reduced to what hostprof uses. */
struct rattr {
	uint8_t key;		/* enum attr_key; ATTR_NKEYS for keys hostprof ignores */
	uint8_t frame_kind;	/* profile.frame.type */
	bool has_file_id;
	uint8_t file_id[16];	/* htlhash */
	bool has_int;
	int64_t ival;		/* thread.id */
	uint32_t str;		/* scratch-profile string index of a string value */
};

struct reader {
	const char *path;
	char *errbuf;
	size_t errlen;
	struct profile *out;	/* the merged result */
	struct profile *tmp;	/* the top-level map being decoded, with the file's indices */
	uint32_t nstrings;	/* the file's string table; values appended after it are not referenceable */
	struct hindex str_index;	/* tmp's strings, so values reuse the file's copy */
	struct rattr *attrs;
	uint32_t nattrs;
	uint32_t nsamples_seen;	/* for messages: samples are numbered across resource profiles */
};

/* "path: what", the path escaped: a directory's listing gives names anyone who can write there chose. */
__attribute__((format(printf, 3, 4))) static int fail(struct reader *r, int err, const char *fmt, ...)
{
	if (r->errlen) {
		size_t n = escape_bytes(r->errbuf, r->errlen, r->path, strlen(r->path), 0);
		n += (size_t)snprintf(r->errbuf + n, r->errlen - n, ": ");
		if (n < r->errlen) {
			va_list ap;
			va_start(ap, fmt);
			vsnprintf(r->errbuf + n, r->errlen - n, fmt, ap);
			va_end(ap);
		}
	}
	return err;
}

/* A profile written by hostprof starts with a map whose first key is 0 (the header). */
static bool looks_like_profile(const uint8_t *buf, size_t len)
{
	size_t key = buf[0] >= 0x80 && buf[0] <= 0x8f ? 1 : buf[0] == 0xde ? 3 : buf[0] == 0xdf ? 5 : 0;
	return key && (len <= key || buf[key] == 0x00);
}

/* --- typed access to decoded objects ------------------------------------------------------------------------ */

/* fields[k] = the value of integer key keys[k] in map (NULL when absent). Other keys are ignored. */
static void map_fields(const msgpack_object *map, const uint8_t *keys, int nkeys, const msgpack_object **fields)
{
	for (int k = 0; k < nkeys; k++)
		fields[k] = NULL;
	for (uint32_t i = 0; i < map->via.map.size; i++) {
		const msgpack_object_kv *kv = &map->via.map.ptr[i];
		if (kv->key.type != MSGPACK_OBJECT_POSITIVE_INTEGER)
			continue;
		for (int k = 0; k < nkeys; k++) {
			if (kv->key.via.u64 == keys[k])
				fields[k] = &kv->val;
		}
	}
}

static const msgpack_object *map_get_str(const msgpack_object *map, const char *key)
{
	size_t n = strlen(key);
	for (uint32_t i = 0; i < map->via.map.size; i++) {
		const msgpack_object_kv *kv = &map->via.map.ptr[i];
		if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == n &&
		    memcmp(kv->key.via.str.ptr, key, n) == 0)
			return &kv->val;
	}
	return NULL;
}

static bool str_is(const msgpack_object *o, const char *s)
{
	return o->type == MSGPACK_OBJECT_STR && o->via.str.size == strlen(s) &&
	       memcmp(o->via.str.ptr, s, o->via.str.size) == 0;
}

#define NO_INDEX UINT32_MAX	/* for places that are not table elements: "dictionary", not "dictionary 0" */

/* "stack 12", or "dictionary" for a NO_INDEX place. */
static const char *place(char *buf, size_t len, const char *what, uint32_t i)
{
	if (i == NO_INDEX)
		return what;
	snprintf(buf, len, "%s %u", what, i);
	return buf;
}

static int expect_map(struct reader *r, const msgpack_object *o, const char *what, uint32_t i)
{
	char at[64];
	if (o->type != MSGPACK_OBJECT_MAP)
		return fail(r, -EBADMSG, "corrupt: %s is not a map", place(at, sizeof(at), what, i));
	return 0;
}

static int get_uint(struct reader *r, const msgpack_object *o, const char *what, uint32_t i, unsigned key,
		    uint64_t *v)
{
	char at[64];
	*v = 0;
	if (!o)
		return 0;
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return fail(r, -EBADMSG, "corrupt: %s: field %u is not an unsigned integer",
			    place(at, sizeof(at), what, i), key);
	*v = o->via.u64;
	return 0;
}

static int get_int(struct reader *r, const msgpack_object *o, const char *what, uint32_t i, unsigned key,
		   int64_t *v)
{
	char at[64];
	*v = 0;
	if (!o)
		return 0;
	if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
		*v = o->via.i64;
	else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT64_MAX)
		*v = (int64_t)o->via.u64;
	else
		return fail(r, -EBADMSG, "corrupt: %s: field %u is not an integer", place(at, sizeof(at), what, i),
			    key);
	return 0;
}

/* An index into a table of count elements. */
static int get_ref(struct reader *r, const msgpack_object *o, const char *what, uint32_t i, unsigned key,
		   const char *target, uint32_t count, uint32_t *ref)
{
	char at[64];
	uint64_t v;
	int err = get_uint(r, o, what, i, key, &v);
	if (err < 0)
		return err;
	if (v >= count)
		return fail(r, -EBADMSG, "corrupt: %s references %s %" PRIu64 " of %u",
			    place(at, sizeof(at), what, i), target, v, count);
	*ref = (uint32_t)v;
	return 0;
}

/* An array field; absent means empty. */
static int get_array(struct reader *r, const msgpack_object *o, const char *what, uint32_t i, unsigned key,
		     const msgpack_object_array **a)
{
	char at[64];
	static const msgpack_object_array empty;
	*a = &empty;
	if (!o)
		return 0;
	if (o->type != MSGPACK_OBJECT_ARRAY)
		return fail(r, -EBADMSG, "corrupt: %s: field %u is not an array", place(at, sizeof(at), what, i),
			    key);
	*a = &o->via.array;
	return 0;
}

static int get_bin(struct reader *r, const msgpack_object *o, const char *what, uint32_t i, unsigned key,
		   uint8_t *out, uint32_t size)
{
	char at[64];
	memset(out, 0, size);
	if (!o)
		return 0;
	if (o->type != MSGPACK_OBJECT_BIN || o->via.bin.size != size)
		return fail(r, -EBADMSG, "corrupt: %s: field %u is not %u bytes of bin",
			    place(at, sizeof(at), what, i), key, size);
	memcpy(out, o->via.bin.ptr, size);
	return 0;
}

/* Copy a msgpack string into a new C string (an embedded NUL ends it). */
static char *dup_str(const msgpack_object *o)
{
	return strndup(o->via.str.ptr, o->via.str.size);
}

static bool tmp_string_eq(const void *table, uint64_t i, const void *key)
{
	return strcmp(profile_string(table, i), key) == 0;
}

static int index_tmp_string(struct reader *r, uint32_t i)
{
	uint64_t h = hash_str(HASH_SEED, profile_string(r->tmp, i));
	int err = hindex_insert(&r->str_index, h, i);
	return err < 0 ? fail(r, err, "%s", strerror(-err)) : 0;
}

/*
 * The string-table index of an attribute or resource value (native msgpack strings in the file): the file's
 * own entry when it has one, as hostprof's writer ensures, so a round trip keeps string indices; else a new one.
 */
static int tmp_add_string(struct reader *r, const msgpack_object *o, uint32_t *index)
{
	struct profile *t = r->tmp;
	char *s;
	int err;
	*index = 0;
	if (o->via.str.size == 0)
		return 0;
	if (!(s = dup_str(o)))
		return fail(r, -ENOMEM, "%s", strerror(ENOMEM));
	if (!*s || hindex_find_index(&r->str_index, hash_str(HASH_SEED, s), tmp_string_eq, t, s, index)) {
		free(s);
		return 0;
	}
	if ((err = PROFILE_TABLE_RESERVE(t->strings, (uint64_t)t->strings.count + 1)) < 0) {
		free(s);
		return fail(r, err, "%s", strerror(-err));
	}
	*index = t->strings.count;
	t->strings.items[t->strings.count++] = s;
	return index_tmp_string(r, *index);
}

/* --- pieces: parts of an object decoded one at a time ------------------------------------------------------- */

/* Bytes of one msgpack object, checked by msgpack_scan_object(); len 0: absent. */
struct piece {
	const uint8_t *data;
	size_t len;
};

/* The header of the container at pc (fix: the first byte of its fix form, 0x80 map or 0x90 array; op16: that
 * of its 16-bit form, op16 + 1 the 32-bit one): its length, and its element count in *count; 0 when pc is not
 * one. */
static size_t container_head(const struct piece *pc, uint8_t fix, uint8_t op16, uint64_t *count)
{
	const uint8_t *b = pc->data;
	size_t p = b[0] >= fix && b[0] <= fix + 0x0f ? 1 : b[0] == op16 ? 3 : b[0] == op16 + 1 ? 5 : 0;
	*count = 0;
	if (p == 0 || pc->len < p)
		return 0;
	for (size_t i = 1; i < p; i++)
		*count = *count << 8 | b[i];
	if (p == 1)
		*count = b[0] & 0x0f;
	return p;
}

/* The values of the small integer keys keys[0..n) in the map at m, as pieces (absent ones: len 0); other keys
 * are skipped, never decoded. false when m is not a map. */
static bool map_pieces(const struct piece *m, const uint8_t *keys, int n, struct piece *out)
{
	const uint8_t *b = m->data;
	uint64_t count;
	size_t p = container_head(m, 0x80, 0xde, &count);
	memset(out, 0, (size_t)n * sizeof(*out));
	if (p == 0)
		return false;
	for (uint64_t k = 0; k < count; k++) {
		uint8_t key = b[p];
		size_t start;
		if (msgpack_scan_object(b, m->len, &p) != MSGPACK_SCAN_OK)
			return false;
		start = p;
		if (msgpack_scan_object(b, m->len, &p) != MSGPACK_SCAN_OK)
			return false;
		for (int i = 0; i < n; i++) {
			if (key == keys[i] && !out[i].len)
				out[i] = (struct piece){ b + start, p - start };
		}
	}
	return true;
}

/* Decode a piece into u (initialized by the caller, destroyed by the caller); an absent piece decodes to
 * nothing. */
static int decode_piece(struct reader *r, const struct piece *pc, msgpack_unpacked *u)
{
	if (!pc->len)
		return 0;
	switch (msgpack_unpack_next(u, (const char *)pc->data, pc->len, NULL)) {
	case MSGPACK_UNPACK_SUCCESS:
		return 0;
	case MSGPACK_UNPACK_NOMEM_ERROR:	/* also what msgpack-c says when nesting exceeds its stack */
		return fail(r, -EBADMSG, "corrupt: msgpack nested too deeply (or out of memory)");
	default:
		return fail(r, -EBADMSG, "corrupt: invalid msgpack");
	}
}

/* --- header ------------------------------------------------------------------------------------------------- */

static int header_string(struct reader *r, const msgpack_object *map, const char *key, char **field)
{
	const msgpack_object *o = map_get_str(map, key);
	if (!o)
		return 0;
	if (o->type != MSGPACK_OBJECT_STR)
		return fail(r, -EBADMSG, "corrupt: header field \"%s\" is not a string", key);
	if (o->via.str.size == 0)
		return 0;
	free(*field);
	if (!(*field = dup_str(o)))
		return fail(r, -ENOMEM, "%s", strerror(ENOMEM));
	return 0;
}

static int header_uint(struct reader *r, const msgpack_object *map, const char *key, uint64_t *v)
{
	const msgpack_object *o = map_get_str(map, key);
	if (!o)
		return 0;
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return fail(r, -EBADMSG, "corrupt: header field \"%s\" is not an unsigned integer", key);
	*v = o->via.u64;
	return 0;
}

/* An optional count that fits 32 bits: left as it is when absent. */
static int header_u32(struct reader *r, const msgpack_object *map, const char *key, uint32_t *v)
{
	uint64_t u = *v;
	int err = header_uint(r, map, key, &u);
	if (err < 0)
		return err;
	if (u > UINT32_MAX)
		return fail(r, -EBADMSG, "corrupt: header field \"%s\" is %" PRIu64 ", past 2^32 - 1", key, u);
	*v = (uint32_t)u;
	return 0;
}

static int check_version(struct reader *r, const msgpack_object *h)
{
	const msgpack_object *v = map_get_str(h, "version");
	uint64_t major = 0, minor = 0;
	if (v && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
		major = v->via.u64;
	} else if (v && v->type == MSGPACK_OBJECT_ARRAY && v->via.array.size >= 1 &&
		   v->via.array.ptr[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
		major = v->via.array.ptr[0].via.u64;
		if (v->via.array.size >= 2 && v->via.array.ptr[1].type == MSGPACK_OBJECT_POSITIVE_INTEGER)
			minor = v->via.array.ptr[1].via.u64;
	} else {
		return fail(r, -EBADMSG, "corrupt: the header has no valid \"version\"");
	}
	if (major != PROFILE_FORMAT_MAJOR)
		return fail(r, -EPROTONOSUPPORT,
			    "profile format version %" PRIu64 ".%" PRIu64 " is not supported (this hostprof reads "
			    "version %d.x)", major, minor, PROFILE_FORMAT_MAJOR);
	return 0;
}

/* A hostprof profile's header, of a version this reader knows. */
static int check_header(struct reader *r, const msgpack_object *h)
{
	const msgpack_object *format = h->type == MSGPACK_OBJECT_MAP ? map_get_str(h, "format") : NULL;
	if (!format || !str_is(format, PROFILE_FORMAT_NAME))
		return fail(r, -EINVAL, "not a hostprof profile");
	return check_version(r, h);
}

static int read_header(struct reader *r, const msgpack_object *h)
{
	struct profile_info *i = &r->tmp->info;
	const msgpack_object *host, *stats;
	int err;
	if ((err = check_header(r, h)) < 0 || (err = header_string(r, h, "producer", &i->producer)) < 0)
		return err;
	if ((host = map_get_str(h, "host")) && host->type == MSGPACK_OBJECT_MAP &&
	    ((err = header_string(r, host, "hostname", &i->hostname)) < 0 ||
	     (err = header_string(r, host, "host.id", &i->host_id)) < 0 ||
	     (err = header_string(r, host, "kernel", &i->kernel)) < 0 ||
	     (err = header_u32(r, host, "cpus_online", &i->cpus_online)) < 0 ||
	     (err = header_u32(r, host, "cpus_available", &i->cpus_available)) < 0))
		return err;
	if (!(stats = map_get_str(h, "stats")) || stats->type != MSGPACK_OBJECT_MAP)
		return 0;
	if ((err = header_uint(r, stats, "samples", &i->samples)) < 0 ||
	    (err = header_uint(r, stats, "lost", &i->lost)) < 0 ||
	    (err = header_uint(r, stats, "lost_fast_lane", &i->lost_fast_lane)) < 0 ||
	    (err = header_uint(r, stats, "unwound_complete", &i->unwound_complete)) < 0 ||
	    (err = header_uint(r, stats, "truncated", &i->truncated)) < 0 ||
	    (err = header_uint(r, stats, "unknown", &i->unknown)) < 0 ||
	    (err = header_uint(r, stats, "frequency_hz", &i->frequency_hz)) < 0 ||
	    (err = header_uint(r, stats, "start_unix_ns", &i->start_unix_ns)) < 0 ||
	    (err = header_uint(r, stats, "duration_ns", &i->duration_ns)) < 0 ||
	    (err = header_uint(r, stats, "period_ns", &i->period_ns)) < 0 ||
	    (err = header_string(r, stats, "event", &i->event)) < 0 ||
	    (err = header_string(r, stats, "unwinder", &i->unwinder)) < 0 ||
	    (err = header_string(r, stats, "cmdline", &i->cmdline)) < 0 ||
	    (err = header_uint(r, stats, "off_cpu_switches", &i->off_cpu_switches)) < 0 ||
	    (err = header_uint(r, stats, "off_cpu_threshold_ns", &i->off_cpu_threshold_ns)) < 0 ||
	    (err = header_uint(r, stats, "off_cpu_capped", &i->off_cpu_capped)) < 0 ||
	    (err = header_uint(r, stats, "off_cpu_no_stack", &i->off_cpu_no_stack)) < 0 ||
	    (err = header_uint(r, stats, "off_cpu_lost", &i->off_cpu_lost)) < 0 ||
	    (err = header_uint(r, stats, "timestamps_dropped", &i->timestamps_dropped)) < 0)
		return err;
	return 0;
}

/* --- dictionary --------------------------------------------------------------------------------------------- */

/* Allocate a scratch table of max(n, 1) zeroed elements: element 0 is the zero value whatever the file holds. */
static int alloc_table(struct reader *r, void **items, uint32_t *count, uint32_t *cap, uint32_t n, size_t size)
{
	uint32_t c = n ? n : 1;
	if (!(*items = calloc(c, size)))
		return fail(r, -ENOMEM, "%s", strerror(ENOMEM));
	*count = *cap = c;
	return 0;
}

#define ALLOC_TABLE(r, t, n) alloc_table((r), (void **)&(t).items, &(t).count, &(t).cap, (n), sizeof(*(t).items))

static int read_strings(struct reader *r, const msgpack_object_array *a)
{
	int err = ALLOC_TABLE(r, r->tmp->strings, a->size);
	r->nstrings = r->tmp->strings.count;
	for (uint32_t i = 1; err == 0 && i < a->size; i++) {
		if (a->ptr[i].type != MSGPACK_OBJECT_STR)
			return fail(r, -EBADMSG, "corrupt: string %u is not a string", i);
		if (!(r->tmp->strings.items[i] = dup_str(&a->ptr[i])))
			return fail(r, -ENOMEM, "%s", strerror(ENOMEM));
		if ((err = index_tmp_string(r, i)) < 0)
			return err;
	}
	return err;
}

static bool parse_hex16(const msgpack_object *o, uint8_t *out)
{
	if (o->type != MSGPACK_OBJECT_STR || o->via.str.size != 32)
		return false;
	for (int i = 0; i < 32; i++) {
		char c = o->via.str.ptr[i];
		int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
			c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (v < 0)
			return false;
		out[i / 2] = (uint8_t)(i % 2 ? out[i / 2] | v : v << 4);
	}
	return true;
}

/* Values of the wrong type are ignored: attributes are descriptive, and other producers may differ. */
static int decode_attr_value(struct reader *r, struct rattr *a, const msgpack_object *v)
{
	bool is_str = v->type == MSGPACK_OBJECT_STR;
	switch (a->key) {
	case ATTR_HTLHASH:
		a->has_file_id = parse_hex16(v, a->file_id);
		return 0;
	case ATTR_GNU_BUILD_ID:
	case ATTR_THREAD_NAME:
	case ATTR_SERVICE_NAME:
		return is_str ? tmp_add_string(r, v, &a->str) : 0;
	case ATTR_FRAME_TYPE:
		if (is_str)
			msgpack_frame_type_kind(v->via.str.ptr, v->via.str.size, &a->frame_kind);
		return 0;
	case ATTR_THREAD_ID:
		if (v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER || v->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
			a->has_int = true;
			a->ival = v->via.i64;
		}
		return 0;
	}
	return 0;
}

static int read_attributes(struct reader *r, const msgpack_object_array *a)
{
	static const uint8_t keys[] = { 1, 2 };
	r->nattrs = a->size ? a->size : 1;
	if (!(r->attrs = calloc(r->nattrs, sizeof(*r->attrs))))
		return fail(r, -ENOMEM, "%s", strerror(ENOMEM));
	r->attrs[0].key = ATTR_NKEYS;
	for (uint32_t i = 1; i < a->size; i++) {
		const msgpack_object *f[2];
		struct rattr *at = &r->attrs[i];
		uint32_t key;
		int err;
		if ((err = expect_map(r, &a->ptr[i], "attribute", i)) < 0)
			return err;
		map_fields(&a->ptr[i], keys, 2, f);
		if ((err = get_ref(r, f[0], "attribute", i, 1, "string", r->nstrings, &key)) < 0)
			return err;
		at->key = ATTR_NKEYS;
		for (int k = 0; k < ATTR_NKEYS; k++) {
			if (strcmp(profile_string(r->tmp, key), msgpack_attr_key_name(k)) == 0)
				at->key = (uint8_t)k;
		}
		if (f[1] && (err = decode_attr_value(r, at, f[1])) < 0)
			return err;
	}
	return 0;
}

/* The attributes an element lists, each bound-checked. */
static int get_attrs(struct reader *r, const msgpack_object *o, const char *what, uint32_t i, unsigned key,
		     const struct rattr **out, uint32_t max, uint32_t *n)
{
	const msgpack_object_array *a;
	int err = get_array(r, o, what, i, key, &a);
	*n = 0;
	for (uint32_t k = 0; err == 0 && k < a->size; k++) {
		uint32_t idx = 0;
		if ((err = get_ref(r, &a->ptr[k], what, i, key, "attribute", r->nattrs, &idx)) < 0)
			return err;
		if (*n < max)
			out[(*n)++] = &r->attrs[idx];
	}
	return err;
}

#define MAX_ELEMENT_ATTRS 16	/* more than any element needs; extra ones are checked but not used */

static int read_mapping(struct reader *r, const msgpack_object *o, uint32_t i, struct profile_mapping *m)
{
	static const uint8_t keys[] = { 1, 2, 3, 4, 5 };
	const msgpack_object *f[5];
	const struct rattr *at[MAX_ELEMENT_ATTRS];
	uint32_t nat;
	int err;
	if ((err = expect_map(r, o, "mapping", i)) < 0)
		return err;
	map_fields(o, keys, 5, f);
	if ((err = get_uint(r, f[0], "mapping", i, 1, &m->memory_start)) < 0 ||
	    (err = get_uint(r, f[1], "mapping", i, 2, &m->memory_limit)) < 0 ||
	    (err = get_uint(r, f[2], "mapping", i, 3, &m->file_offset)) < 0 ||
	    (err = get_ref(r, f[3], "mapping", i, 4, "string", r->nstrings, &m->filename)) < 0 ||
	    (err = get_attrs(r, f[4], "mapping", i, 5, at, MAX_ELEMENT_ATTRS, &nat)) < 0)
		return err;
	for (uint32_t k = 0; k < nat; k++) {
		if (at[k]->key == ATTR_HTLHASH && at[k]->has_file_id)
			memcpy(m->file_id, at[k]->file_id, 16);
		else if (at[k]->key == ATTR_GNU_BUILD_ID)
			m->build_id = at[k]->str;
	}
	return 0;
}

static int read_mappings(struct reader *r, const msgpack_object_array *a)
{
	int err = ALLOC_TABLE(r, r->tmp->mappings, a->size);
	for (uint32_t i = 1; err == 0 && i < a->size; i++)
		err = read_mapping(r, &a->ptr[i], i, &r->tmp->mappings.items[i]);
	return err;
}

static int read_functions(struct reader *r, const msgpack_object_array *a)
{
	static const uint8_t keys[] = { 1, 3 };
	uint32_t nstrings = r->nstrings;
	int err = ALLOC_TABLE(r, r->tmp->functions, a->size);
	for (uint32_t i = 1; err == 0 && i < a->size; i++) {
		struct profile_function *fn = &r->tmp->functions.items[i];
		const msgpack_object *f[2];
		if ((err = expect_map(r, &a->ptr[i], "function", i)) < 0)
			return err;
		map_fields(&a->ptr[i], keys, 2, f);
		if ((err = get_ref(r, f[0], "function", i, 1, "string", nstrings, &fn->name)) == 0)
			err = get_ref(r, f[1], "function", i, 3, "string", nstrings, &fn->filename);
	}
	return err;
}

static int read_lines(struct reader *r, const msgpack_object *o, uint32_t i, struct profile_location *l)
{
	static const uint8_t keys[] = { 1, 2 };
	const msgpack_object_array *a;
	int err = get_array(r, o, "location", i, 3, &a);
	if (err < 0 || a->size == 0)
		return err;
	if (!(l->lines = calloc(a->size, sizeof(*l->lines))))
		return fail(r, -ENOMEM, "%s", strerror(ENOMEM));
	l->nlines = a->size;
	for (uint32_t k = 0; k < a->size; k++) {
		const msgpack_object *f[2];
		if (a->ptr[k].type != MSGPACK_OBJECT_MAP)
			return fail(r, -EBADMSG, "corrupt: location %u: line %u is not a map", i, k);
		map_fields(&a->ptr[k], keys, 2, f);
		if ((err = get_ref(r, f[0], "location", i, 3, "function", r->tmp->functions.count,
				   &l->lines[k].function)) < 0 ||
		    (err = get_int(r, f[1], "location", i, 3, &l->lines[k].line)) < 0)
			return err;
	}
	return 0;
}

static int read_location(struct reader *r, const msgpack_object *o, uint32_t i, struct profile_location *l)
{
	static const uint8_t keys[] = { 1, 2, 3, 4, PROFILE_EXT_FRAME_KIND };
	const msgpack_object *f[5];
	const struct rattr *at[MAX_ELEMENT_ATTRS];
	uint32_t nat;
	uint64_t kind;
	int err;
	if ((err = expect_map(r, o, "location", i)) < 0)
		return err;
	map_fields(o, keys, 5, f);
	if ((err = get_ref(r, f[0], "location", i, 1, "mapping", r->tmp->mappings.count, &l->mapping)) < 0 ||
	    (err = get_uint(r, f[1], "location", i, 2, &l->address)) < 0 ||
	    (err = read_lines(r, f[2], i, l)) < 0 ||
	    (err = get_attrs(r, f[3], "location", i, 4, at, MAX_ELEMENT_ATTRS, &nat)) < 0 ||
	    (err = get_uint(r, f[4], "location", i, PROFILE_EXT_FRAME_KIND, &kind)) < 0)
		return err;
	if (kind > UINT8_MAX)
		return fail(r, -EBADMSG, "corrupt: location %u: frame kind %" PRIu64 " is out of range", i, kind);
	for (uint32_t k = 0; k < nat && !f[4]; k++) {
		if (at[k]->key == ATTR_FRAME_TYPE)
			kind = at[k]->frame_kind;
	}
	l->frame_kind = (uint8_t)kind;
	return 0;
}

static int read_locations(struct reader *r, const msgpack_object_array *a)
{
	int err = ALLOC_TABLE(r, r->tmp->locations, a->size);
	for (uint32_t i = 1; err == 0 && i < a->size; i++)
		err = read_location(r, &a->ptr[i], i, &r->tmp->locations.items[i]);
	return err;
}

static int read_links(struct reader *r, const msgpack_object_array *a)
{
	static const uint8_t keys[] = { 1, 2 };
	int err = ALLOC_TABLE(r, r->tmp->links, a->size);
	for (uint32_t i = 1; err == 0 && i < a->size; i++) {
		struct profile_link *l = &r->tmp->links.items[i];
		const msgpack_object *f[2];
		if ((err = expect_map(r, &a->ptr[i], "link", i)) < 0)
			return err;
		map_fields(&a->ptr[i], keys, 2, f);
		if ((err = get_bin(r, f[0], "link", i, 1, l->trace_id, 16)) == 0)
			err = get_bin(r, f[1], "link", i, 2, l->span_id, 8);
	}
	return err;
}

static int read_stack(struct reader *r, const msgpack_object *o, uint32_t i, struct profile_stack *s)
{
	static const uint8_t keys[] = { 1, PROFILE_EXT_TRACE_ID };
	const msgpack_object *f[2];
	const msgpack_object_array *a;
	int err;
	if ((err = expect_map(r, o, "stack", i)) < 0)
		return err;
	map_fields(o, keys, 2, f);
	if ((err = get_bin(r, f[1], "stack", i, PROFILE_EXT_TRACE_ID, s->trace_id, 16)) < 0 ||
	    (err = get_array(r, f[0], "stack", i, 1, &a)) < 0 || a->size == 0)
		return err;
	/* Views walk and print each stack's frames (a tree's depth): no more of them than hostprof records. */
	if (a->size > PROFILE_MAX_STACK_LOCATIONS)
		return fail(r, -EBADMSG, "corrupt: stack %u has %u frames, more than hostprof records (%u)", i,
			    a->size, PROFILE_MAX_STACK_LOCATIONS);
	if (!(s->locations = calloc(a->size, sizeof(*s->locations))))
		return fail(r, -ENOMEM, "%s", strerror(ENOMEM));
	s->nlocations = a->size;
	for (uint32_t k = 0; k < a->size; k++) {
		if ((err = get_ref(r, &a->ptr[k], "stack", i, 1, "location", r->tmp->locations.count,
				   &s->locations[k])) < 0)
			return err;
	}
	return 0;
}

static int read_stacks(struct reader *r, const msgpack_object_array *a)
{
	int err = ALLOC_TABLE(r, r->tmp->stacks, a->size);
	for (uint32_t i = 1; err == 0 && i < a->size; i++)
		err = read_stack(r, &a->ptr[i], i, &r->tmp->stacks.items[i]);
	return err;
}

/* Tables are read in dependency order: strings, attributes, mappings, functions, locations, links, stacks. */
/* Whether the header byte b starts a map (strings: a str). */
static bool starts_element(uint8_t b, bool str)
{
	return str ? (b >= 0xa0 && b <= 0xbf) || (b >= 0xd9 && b <= 0xdb) : (b >= 0x80 && b <= 0x8f) || b == 0xde ||
							  b == 0xdf;
}

/*
 * Before a table is decoded, its elements' types from their first bytes (element 0 is never read): a table
 * of millions of elements that are not what a table holds (4 MB of empty arrays) is refused at the cost of a
 * pass over its bytes, not of decoding them all first (24 bytes per element in msgpack-c's objects). A piece
 * that is not an array is left to get_array() to refuse.
 */
static int check_table_elements(struct reader *r, const struct piece *t, bool str, const char *what)
{
	const uint8_t *b = t->data;
	uint64_t n;
	size_t p = container_head(t, 0x90, 0xdc, &n);
	char at[64];
	if (p == 0)
		return 0;
	for (uint64_t i = 0; i < n; i++) {
		if (i > 0 && !starts_element(b[p], str))
			return fail(r, -EBADMSG, "corrupt: %s is not a %s", place(at, sizeof(at), what, (uint32_t)i),
				    str ? "string" : "map");
		if (msgpack_scan_object(b, t->len, &p) != MSGPACK_SCAN_OK)
			return fail(r, -EBADMSG, "corrupt: invalid msgpack");
	}
	return 0;
}

/* Each table decoded alone (struct piece), so that decoding never holds more than the largest table. */
static int read_dictionary(struct reader *r, const struct piece *d)
{
	static const uint8_t keys[] = { DICT_STRINGS, DICT_ATTRIBUTES, DICT_MAPPINGS, DICT_FUNCTIONS,
					DICT_LOCATIONS, DICT_LINKS, DICT_STACKS };
	static int (*const readers[])(struct reader *, const msgpack_object_array *) = {
		read_strings, read_attributes, read_mappings, read_functions, read_locations, read_links, read_stacks,
	};
	static const char *const names[] = { "string", "attribute", "mapping", "function", "location", "link",
					     "stack" };
	struct piece t[7];
	int err = 0;
	if (d->len && !map_pieces(d, keys, 7, t))
		return fail(r, -EBADMSG, "corrupt: the dictionary is not a map");
	if (!d->len)
		memset(t, 0, sizeof(t));
	for (int k = 0; k < 7 && err == 0; k++) {
		msgpack_unpacked u;
		const msgpack_object_array *a;
		if (t[k].len && (err = check_table_elements(r, &t[k], k == 0, names[k])) < 0)
			break;
		msgpack_unpacked_init(&u);
		if ((err = decode_piece(r, &t[k], &u)) == 0 &&
		    (err = get_array(r, t[k].len ? &u.data : NULL, "dictionary", NO_INDEX, keys[k], &a)) == 0)
			err = readers[k](r, a);
		msgpack_unpacked_destroy(&u);
	}
	return err;
}

/* --- resource profiles -------------------------------------------------------------------------------------- */

struct resource {
	int32_t pid;
	uint32_t comm;
};

/* A sample's timestamps (absent: none): unsigned integers, no more than its count (one per CPU sample). */
static int read_timestamps(struct reader *r, const msgpack_object *o, uint32_t i, struct profile_sample *s)
{
	const msgpack_object_array *a;
	int err = get_array(r, o, "sample", i, PROFILE_EXT_TIMESTAMPS, &a);
	if (err < 0 || a->size == 0)
		return err;
	if (a->size > s->count)
		return fail(r, -EBADMSG, "corrupt: sample %" PRIu32 " has %" PRIu32 " timestamps for %" PRIu64
			    " samples", i, a->size, s->count);
	if (!(s->timestamps = malloc((size_t)a->size * sizeof(*s->timestamps))))
		return fail(r, -ENOMEM, "%s", strerror(ENOMEM));
	s->ntimestamps = a->size;
	for (uint32_t k = 0; k < a->size; k++) {
		if ((err = get_uint(r, &a->ptr[k], "sample", i, PROFILE_EXT_TIMESTAMPS, &s->timestamps[k])) < 0)
			return err;
	}
	return 0;
}

static int read_sample(struct reader *r, const msgpack_object *o, const struct resource *res)
{
	static const uint8_t keys[] = { 1, 2, 3, 4, PROFILE_EXT_CPU_NS, PROFILE_EXT_OFF_CPU_NS,
					PROFILE_EXT_PREEMPTED_NS, PROFILE_EXT_TIMESTAMPS };
	const msgpack_object *f[8];
	const struct rattr *at[MAX_ELEMENT_ATTRS];
	const msgpack_object_array *values;
	struct profile_sample s = { .pid = res->pid, .comm = res->comm };
	struct profile *t = r->tmp;
	uint32_t i = r->nsamples_seen++, nat;
	int err;
	if ((err = expect_map(r, o, "sample", i)) < 0)
		return err;
	map_fields(o, keys, 8, f);
	if ((err = get_ref(r, f[0], "sample", i, 1, "stack", t->stacks.count, &s.stack)) < 0 ||
	    (err = get_attrs(r, f[1], "sample", i, 2, at, MAX_ELEMENT_ATTRS, &nat)) < 0 ||
	    (err = get_ref(r, f[2], "sample", i, 3, "link", t->links.count, &s.link)) < 0 ||
	    (err = get_array(r, f[3], "sample", i, 4, &values)) < 0 ||
	    (values->size && (err = get_uint(r, &values->ptr[0], "sample", i, 4, &s.count)) < 0) ||
	    (err = get_uint(r, f[4], "sample", i, PROFILE_EXT_CPU_NS, &s.cpu_ns)) < 0 ||
	    (err = get_uint(r, f[5], "sample", i, PROFILE_EXT_OFF_CPU_NS, &s.off_cpu_ns)) < 0 ||
	    (err = get_uint(r, f[6], "sample", i, PROFILE_EXT_PREEMPTED_NS, &s.preempted_ns)) < 0)
		return err;
	if (s.preempted_ns > s.off_cpu_ns)
		return fail(r, -EBADMSG, "corrupt: sample %" PRIu32 ": preempted time exceeds its off-CPU time", i);
	if ((err = read_timestamps(r, f[7], i, &s)) < 0) {
		free(s.timestamps);
		return err;
	}
	for (uint32_t k = 0; k < nat; k++) {
		if (at[k]->key == ATTR_THREAD_ID && at[k]->has_int)
			s.tid = (int32_t)at[k]->ival;
		else if (at[k]->key == ATTR_THREAD_NAME)
			s.thread_name = at[k]->str;
		else if (at[k]->key == ATTR_SERVICE_NAME)
			s.service = at[k]->str;
	}
	if ((err = PROFILE_TABLE_RESERVE(t->samples, (uint64_t)t->samples.count + 1)) < 0) {
		free(s.timestamps);
		return fail(r, err, "%s", strerror(-err));
	}
	t->samples.items[t->samples.count++] = s;
	return 0;
}

/* The process's path and container, when the resource says them (files of earlier versions do not). Appended
 * to the scratch profile as they come: several resources of one pid are made one by the merge. */
static int read_resource_process(struct reader *r, const msgpack_object *attrs, int32_t pid)
{
	struct profile_process pr = { .pid = pid };
	struct profile *t = r->tmp;
	const msgpack_object *v;
	int err;
	if ((v = map_get_str(attrs, RESOURCE_EXE_PATH)) && v->type == MSGPACK_OBJECT_STR &&
	    (err = tmp_add_string(r, v, &pr.exe_path)) < 0)
		return err;
	if ((v = map_get_str(attrs, RESOURCE_CONTAINER_ID)) && v->type == MSGPACK_OBJECT_STR &&
	    (err = tmp_add_string(r, v, &pr.container_id)) < 0)
		return err;
	if (!pr.exe_path && !pr.container_id)
		return 0;
	if ((err = PROFILE_TABLE_RESERVE(t->processes, (uint64_t)t->processes.count + 1)) < 0)
		return fail(r, err, "%s", strerror(-err));
	t->processes.items[t->processes.count++] = pr;
	return 0;
}

static int read_resource(struct reader *r, const msgpack_object *o, struct resource *res)
{
	static const uint8_t keys[] = { 1 };
	const msgpack_object *attrs, *v;
	int err;
	*res = (struct resource){ 0 };
	if (!o)
		return 0;
	if (o->type != MSGPACK_OBJECT_MAP)
		return fail(r, -EBADMSG, "corrupt: a resource is not a map");
	map_fields(o, keys, 1, &attrs);
	if (!attrs || attrs->type != MSGPACK_OBJECT_MAP)
		return 0;
	if ((v = map_get_str(attrs, RESOURCE_PID))) {
		if ((v->type != MSGPACK_OBJECT_POSITIVE_INTEGER && v->type != MSGPACK_OBJECT_NEGATIVE_INTEGER) ||
		    v->via.i64 < INT32_MIN || v->via.i64 > INT32_MAX)
			return fail(r, -EBADMSG, "corrupt: resource attribute " RESOURCE_PID " is not a pid");
		res->pid = (int32_t)v->via.i64;
	}
	if ((v = map_get_str(attrs, RESOURCE_COMM)) && v->type == MSGPACK_OBJECT_STR &&
	    (err = tmp_add_string(r, v, &res->comm)) < 0)
		return err;
	return read_resource_process(r, attrs, res->pid);
}

static int read_profile_samples(struct reader *r, const msgpack_object *profile, const struct resource *res)
{
	static const uint8_t keys[] = { 2 };
	const msgpack_object *f;
	const msgpack_object_array *samples;
	int err;
	if (profile->type != MSGPACK_OBJECT_MAP)
		return fail(r, -EBADMSG, "corrupt: a profile is not a map");
	map_fields(profile, keys, 1, &f);
	if ((err = get_array(r, f, "profile", NO_INDEX, 2, &samples)) < 0)
		return err;
	for (uint32_t i = 0; i < samples->size; i++) {
		if ((err = read_sample(r, &samples->ptr[i], res)) < 0)
			return err;
	}
	return 0;
}

static int read_scope_profiles(struct reader *r, const msgpack_object *sp, const struct resource *res)
{
	static const uint8_t keys[] = { 2 };
	const msgpack_object *f;
	const msgpack_object_array *profiles;
	int err;
	if (sp->type != MSGPACK_OBJECT_MAP)
		return fail(r, -EBADMSG, "corrupt: a scope profile is not a map");
	map_fields(sp, keys, 1, &f);
	if ((err = get_array(r, f, "scope profile", NO_INDEX, 2, &profiles)) < 0)
		return err;
	for (uint32_t i = 0; i < profiles->size; i++) {
		if ((err = read_profile_samples(r, &profiles->ptr[i], res)) < 0)
			return err;
	}
	return 0;
}

static int read_resource_profiles(struct reader *r, const msgpack_object *o)
{
	static const uint8_t keys[] = { 1, 2 };
	const msgpack_object_array *rps, *scopes;
	int err;
	if ((err = get_array(r, o, "top-level map", NO_INDEX, KEY_RESOURCE_PROFILES, &rps)) < 0)
		return err;
	for (uint32_t i = 0; i < rps->size; i++) {
		const msgpack_object *f[2];
		struct resource res;
		if ((err = expect_map(r, &rps->ptr[i], "resource profile", i)) < 0)
			return err;
		map_fields(&rps->ptr[i], keys, 2, f);
		if ((err = read_resource(r, f[0], &res)) < 0 ||
		    (err = get_array(r, f[1], "resource profile", i, 2, &scopes)) < 0)
			return err;
		for (uint32_t k = 0; k < scopes->size; k++) {
			if ((err = read_scope_profiles(r, &scopes->ptr[k], &res)) < 0)
				return err;
		}
	}
	return 0;
}

/* --- top level ---------------------------------------------------------------------------------------------- */

/* A piece decoded and handed to read (header, resource profiles), then freed. */
static int read_piece(struct reader *r, const struct piece *pc, int (*read)(struct reader *, const msgpack_object *))
{
	msgpack_unpacked u;
	msgpack_unpacked_init(&u);
	int err = decode_piece(r, pc, &u);
	if (err == 0)
		err = read(r, pc->len ? &u.data : NULL);
	msgpack_unpacked_destroy(&u);
	return err;
}

/*
 * One top-level map, decoded a part at a time: the header first, so that what is not a hostprof profile of a
 * known version is refused for the cost of its header; then each dictionary table and the resource profiles,
 * each freed before the next; keys hostprof does not know are never decoded. Memory stays proportional to what
 * the file holds that a profile uses, not to everything it declares.
 */
static int read_top_map(struct reader *r, const struct piece *root)
{
	static const uint8_t keys[] = { KEY_HEADER, KEY_RESOURCE_PROFILES, KEY_DICTIONARY };
	struct piece f[3];
	int err;
	if (!map_pieces(root, keys, 3, f) || !f[0].len)
		return fail(r, -EINVAL, "not a hostprof profile");
	if ((err = read_piece(r, &f[0], read_header)) < 0 || (err = read_dictionary(r, &f[2])) < 0 ||
	    (err = read_piece(r, &f[1], read_resource_profiles)) < 0)
		return err;
	if ((err = profile_merge(r->out, r->tmp)) == -EOVERFLOW)
		return fail(r, -EBADMSG, "corrupt: the samples add up past %" PRIu64 " (sample counts, or times in "
			    "ns)", PROFILE_VALUE_MAX);
	if (err < 0)
		return fail(r, err, "%s", strerror(-err));
	return 0;
}

static int decode_object(struct reader *r, const uint8_t *data, size_t len)
{
	struct piece root = { data, len };
	int err;
	if (!(r->tmp = calloc(1, sizeof(*r->tmp))))
		err = fail(r, -ENOMEM, "%s", strerror(ENOMEM));
	else
		err = read_top_map(r, &root);
	profile_free(r->tmp);
	r->tmp = NULL;
	free(r->attrs);
	r->attrs = NULL;
	r->nattrs = 0;
	hindex_free(&r->str_index);
	return err;
}

/* Decode each top-level map in turn, merging it into r->out. */
static int read_buffer(struct reader *r, const uint8_t *buf, size_t len)
{
	size_t pos = 0;
	if (len == 0)
		return fail(r, -EINVAL, "not a hostprof profile (empty file)");
	while (pos < len) {
		size_t start = pos;
		enum msgpack_scan_result s = msgpack_scan_object(buf, len, &pos);
		if (s != MSGPACK_SCAN_OK && start == 0 && !looks_like_profile(buf, len))
			return fail(r, -EINVAL, "not a hostprof profile");
		if (s == MSGPACK_SCAN_TRUNCATED)
			return fail(r, -EBADMSG, "truncated: the profile ends before its data does (%zu bytes)", len);
		if (s == MSGPACK_SCAN_INVALID)
			return fail(r, -EBADMSG, "corrupt: invalid msgpack after byte %zu", start);
		int err = decode_object(r, buf + start, pos - start);
		if (err < 0)
			return err;
	}
	return 0;
}

/* Far above any real profile (1e5 stacks take about 10 MiB); stops `report /dev/zero` from eating memory. */
#define PROFILE_READ_MAX ((size_t)1 << 30)

int profile_read_file(const char *path, struct profile **out, char *errbuf, size_t errlen)
{
	struct reader r = { .path = path, .errbuf = errbuf, .errlen = errlen };
	uint8_t *buf = NULL;
	size_t len = 0;
	int err;
	*out = NULL;
	if (errlen)
		errbuf[0] = '\0';
	struct stat st;
	int fd = regular_file_open(AT_FDCWD, path, 0, &st);
	if (fd == -EINVAL)
		return fail(&r, fd, "not a regular file (%s)", regular_file_kind(st.st_mode));
	if (fd < 0)
		return fail(&r, fd, "%s", strerror(-fd));
	err = read_fd_all(fd, PROFILE_READ_MAX, &buf, &len);
	close(fd);
	if (err < 0)
		return fail(&r, err, "%s", strerror(-err));
	if ((err = profile_new(&r.out)) < 0) {
		free(buf);
		return fail(&r, err, "%s", strerror(-err));
	}
	err = read_buffer(&r, buf, len);
	free(buf);
	if (err < 0) {
		profile_free(r.out);
		return err;
	}
	*out = r.out;
	return 0;
}
