/*
 * wasmkeep.c: the C SDK of the wasmkeep guest ABI (wasmhost/ABI.md): the
 * event's arena, the encodings, and the helpers over the host functions.
 */
/* clock_gettime, under -std=c11 too. */
#define _POSIX_C_SOURCE 200809L

#include "wasmkeep.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The export the host checks when it starts a guest. */
int32_t wasmkeep_abi_version(void);
__attribute__((export_name("wasmkeep_abi_version"))) int32_t wasmkeep_abi_version(void) {
	return WASMKEEP_ABI_VERSION;
}
int32_t wasmkeep_abi_minor(void);
__attribute__((export_name("wasmkeep_abi_minor"))) int32_t wasmkeep_abi_minor(void) { return WASMKEEP_ABI_MINOR; }

/* Lengths and pointers are i32 in the ABI, as size_t is on wasm32. */
_Static_assert(sizeof(size_t) == 4 && sizeof(void *) == 4, "the ABI is wasm32's");

/* ---- Bytes ---- */

wk_str wk_cstr(const char *s) { return (wk_str){s, strlen(s)}; }

bool wk_str_eq(wk_str a, wk_str b) { return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0); }

static char lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c + ('a' - 'A')) : c; }

bool wk_str_eq_fold(wk_str a, wk_str b) {
	if (a.len != b.len)
		return false;
	for (size_t i = 0; i < a.len; i++)
		if (lower(a.ptr[i]) != lower(b.ptr[i]))
			return false;
	return true;
}

bool wk_str_has_prefix(wk_str s, wk_str prefix) {
	return s.len >= prefix.len && (prefix.len == 0 || memcmp(s.ptr, prefix.ptr, prefix.len) == 0);
}

/* ---- The arena ---- */

/*
 * One event's allocations, in chunks freed together when it ends. Events
 * never overlap in a guest, so one arena serves them all.
 */
typedef struct chunk {
	struct chunk *next;
	size_t size, used;
	_Alignas(max_align_t) unsigned char data[];
} chunk;

enum { CHUNK_SIZE = 64 << 10, ALIGN = _Alignof(max_align_t) };

static chunk *arena;

static size_t align(size_t n) { return (n + ALIGN - 1) & ~(size_t)(ALIGN - 1); }

/* arena_raw returns n bytes, not zeroed. */
static void *arena_raw(size_t n) {
	if (n > SIZE_MAX / 2)
		abort();
	n = align(n);
	if (arena == NULL || arena->size - arena->used < n) {
		size_t size = n > CHUNK_SIZE ? n : CHUNK_SIZE;
		chunk *c = malloc(sizeof(chunk) + size);
		if (c == NULL)
			abort();
		c->next = arena;
		c->size = size;
		c->used = 0;
		arena = c;
	}
	void *p = arena->data + arena->used;
	arena->used += n;
	return p;
}

void *wk_alloc(size_t n) { return memset(arena_raw(n), 0, n); }

wk_str wk_dup(wk_str s) {
	char *p = arena_raw(s.len);
	if (s.len > 0)
		memcpy(p, s.ptr, s.len);
	return (wk_str){p, s.len};
}

static void arena_reset(void) {
	while (arena != NULL) {
		chunk *next = arena->next;
		free(arena);
		arena = next;
	}
}

/* ---- Buffers ---- */

static void buf_reserve(wk_buf *b, size_t n) {
	if (b->cap - b->len >= n)
		return;
	if (n > SIZE_MAX / 4 - b->len)
		abort();
	/* Sizes stay aligned, so that the arena's next allocation is. */
	size_t need = align(b->len + n);
	/* The last allocation of the arena grows in place. */
	if (b->ptr != NULL && arena != NULL && (unsigned char *)b->ptr + b->cap == arena->data + arena->used &&
	    (size_t)((unsigned char *)b->ptr - arena->data) + need <= arena->size) {
		arena->used += need - b->cap;
		b->cap = need;
		return;
	}
	size_t cap = b->cap * 2;
	if (cap < need)
		cap = need;
	if (cap < 64)
		cap = 64;
	char *p = arena_raw(cap);
	if (b->len > 0)
		memcpy(p, b->ptr, b->len);
	b->ptr = p;
	b->cap = cap;
}

void wk_buf_write(wk_buf *b, const void *p, size_t n) {
	if (n == 0)
		return;
	buf_reserve(b, n);
	memcpy(b->ptr + b->len, p, n);
	b->len += n;
}

void wk_buf_write_str(wk_buf *b, wk_str s) { wk_buf_write(b, s.ptr, s.len); }

void wk_buf_write_cstr(wk_buf *b, const char *s) { wk_buf_write(b, s, strlen(s)); }

void wk_buf_write_byte(wk_buf *b, uint8_t c) { wk_buf_write(b, &c, 1); }

void wk_buf_write_int(wk_buf *b, int64_t v) {
	char digits[20];
	size_t i = sizeof digits;
	/* The magnitude as unsigned, so that INT64_MIN has one too. */
	uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;
	do {
		digits[--i] = (char)('0' + u % 10);
		u /= 10;
	} while (u != 0);
	if (v < 0)
		wk_buf_write_byte(b, '-');
	wk_buf_write(b, digits + i, sizeof digits - i);
}

wk_str wk_buf_str(const wk_buf *b) { return (wk_str){b->ptr, b->len}; }

void wk_buf_u8(wk_buf *b, uint8_t v) { wk_buf_write(b, &v, 1); }

void wk_buf_u32(wk_buf *b, uint32_t v) {
	uint8_t le[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
	wk_buf_write(b, le, sizeof le);
}

void wk_buf_u64(wk_buf *b, uint64_t v) {
	wk_buf_u32(b, (uint32_t)v);
	wk_buf_u32(b, (uint32_t)(v >> 32));
}

void wk_buf_string(wk_buf *b, wk_str s) {
	wk_buf_u32(b, (uint32_t)s.len);
	wk_buf_write_str(b, s);
}

/* ---- Decoding ---- */

wk_reader wk_reader_of(wk_str b) { return (wk_reader){(const uint8_t *)b.ptr, b.len, 0, false}; }

static bool has(wk_reader *r, size_t n) {
	if (r->err || r->len - r->off < n) {
		r->err = true;
		return false;
	}
	return true;
}

uint8_t wk_read_u8(wk_reader *r) { return has(r, 1) ? r->p[r->off++] : 0; }

uint32_t wk_read_u32(wk_reader *r) {
	if (!has(r, 4))
		return 0;
	const uint8_t *p = r->p + r->off;
	r->off += 4;
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint64_t wk_read_u64(wk_reader *r) {
	uint64_t lo = wk_read_u32(r);
	return lo | (uint64_t)wk_read_u32(r) << 32;
}

wk_str wk_read_string(wk_reader *r) {
	uint32_t n = wk_read_u32(r);
	if (!has(r, n))
		return (wk_str){"", 0};
	wk_str s = {(const char *)r->p + r->off, n};
	r->off += n;
	return s;
}

uint32_t wk_read_count(wk_reader *r, size_t min_size) {
	uint32_t n = wk_read_u32(r);
	if (!r->err && min_size > 0 && n > (r->len - r->off) / min_size) {
		r->err = true;
		return 0;
	}
	return r->err ? 0 : n;
}

bool wk_read_done(const wk_reader *r) { return !r->err && r->off == r->len; }

/* read_host pulls n bytes that a *_len host function announced through
 * its *_read twin. A short copy is the host breaking the ABI. */
static wk_str read_host(int32_t n, int32_t (*read)(void *, uint32_t)) {
	if (n < 0)
		abort();
	char *p = arena_raw((size_t)n);
	if (read(p, (uint32_t)n) != n)
		abort();
	return (wk_str){p, (size_t)n};
}

/* ---- Requests and responses ---- */

static void write_fields(wk_buf *b, const wk_field *f, size_t n) {
	wk_buf_u32(b, (uint32_t)n);
	for (size_t i = 0; i < n; i++) {
		wk_buf_string(b, f[i].name);
		wk_buf_string(b, f[i].value);
	}
}

static wk_field *read_fields(wk_reader *r, size_t *n) {
	uint32_t count = wk_read_count(r, 8);
	*n = count;
	if (count == 0)
		return NULL;
	wk_field *f = wk_alloc(count * sizeof *f);
	for (uint32_t i = 0; i < count; i++) {
		f[i].name = wk_read_string(r);
		f[i].value = wk_read_string(r);
	}
	return f;
}

static bool read_request(wk_str in, wk_request *req) {
	wk_reader r = wk_reader_of(in);
	req->method = wk_read_string(&r);
	req->path = wk_read_string(&r);
	req->query = wk_read_string(&r);
	req->headers = read_fields(&r, &req->n_headers);
	req->body = wk_read_string(&r);
	return wk_read_done(&r);
}

static void write_request(wk_buf *b, const wk_request *req) {
	wk_buf_string(b, req->method);
	wk_buf_string(b, req->path);
	wk_buf_string(b, req->query);
	write_fields(b, req->headers, req->n_headers);
	wk_buf_string(b, req->body);
}

static void write_response(wk_buf *b, const wk_response *resp) {
	wk_buf_u32(b, resp->status);
	write_fields(b, resp->headers, resp->n_headers);
	wk_buf_string(b, resp->body);
}

static bool read_response(wk_str in, wk_response *resp) {
	wk_reader r = wk_reader_of(in);
	resp->status = wk_read_u32(&r);
	resp->headers = read_fields(&r, &resp->n_headers);
	resp->cap_headers = resp->n_headers;
	resp->body = wk_read_string(&r);
	return wk_read_done(&r);
}

bool wk_header(const wk_request *r, const char *name, wk_str *value) {
	wk_str n = wk_cstr(name);
	for (size_t i = 0; i < r->n_headers; i++) {
		if (wk_str_eq_fold(r->headers[i].name, n)) {
			*value = r->headers[i].value;
			return true;
		}
	}
	return false;
}

static int unhex(char c) {
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* unescape decodes a query component into the arena. */
static wk_str unescape(wk_str s) {
	char *out = arena_raw(s.len);
	size_t n = 0;
	for (size_t i = 0; i < s.len; i++) {
		char c = s.ptr[i];
		if (c == '+') {
			c = ' ';
		} else if (c == '%' && i + 2 < s.len && unhex(s.ptr[i + 1]) >= 0 && unhex(s.ptr[i + 2]) >= 0) {
			c = (char)(unhex(s.ptr[i + 1]) << 4 | unhex(s.ptr[i + 2]));
			i += 2;
		}
		out[n++] = c;
	}
	return (wk_str){out, n};
}

bool wk_query(const wk_request *r, const char *key, wk_str *value) {
	wk_str k = wk_cstr(key);
	const char *p = r->query.ptr, *end = r->query.ptr + r->query.len;
	while (p < end) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		const char *part_end = amp != NULL ? amp : end;
		const char *eq = memchr(p, '=', (size_t)(part_end - p));
		const char *key_end = eq != NULL ? eq : part_end;
		if (wk_str_eq(unescape((wk_str){p, (size_t)(key_end - p)}), k)) {
			const char *v = eq != NULL ? eq + 1 : part_end;
			*value = unescape((wk_str){v, (size_t)(part_end - v)});
			return true;
		}
		p = amp != NULL ? amp + 1 : end;
	}
	return false;
}

wk_response *wk_response_new(uint32_t status) {
	wk_response *resp = wk_alloc(sizeof *resp);
	resp->status = status;
	return resp;
}

void wk_response_header(wk_response *resp, const char *name, wk_str value) {
	if (resp->n_headers == resp->cap_headers) {
		size_t cap = resp->cap_headers ? resp->cap_headers * 2 : 4;
		wk_field *f = wk_alloc(cap * sizeof *f);
		if (resp->n_headers > 0)
			memcpy(f, resp->headers, resp->n_headers * sizeof *f);
		resp->headers = f;
		resp->cap_headers = cap;
	}
	resp->headers[resp->n_headers++] = (wk_field){wk_cstr(name), value};
}

wk_response *wk_text(uint32_t status, wk_str body) {
	wk_response *resp = wk_response_new(status);
	wk_response_header(resp, "Content-Type", WK_STR("text/plain; charset=utf-8"));
	resp->body = body;
	return resp;
}

/* ---- Actors ---- */

/*
 * The objects of the actors this guest serves, in a hash table of chains
 * keyed by id. It shrinks as well as grows, so that actors that came and
 * went leave nothing behind.
 */
typedef struct node {
	wk_actor actor;
	struct node *next;
	char names[]; /* class_name, then name */
} node;

static node **table;
static size_t table_cap, table_len;
static wk_actor *current;
static wk_leave_handler leave_handler;

static size_t slot_of(uint64_t id, size_t cap) {
	id ^= id >> 33;
	id *= 0xff51afd7ed558ccdull;
	id ^= id >> 33;
	return (size_t)(id & (cap - 1));
}

/* resize rehashes the table into cap chains (a power of two). */
static void resize(size_t cap) {
	node **t = calloc(cap, sizeof *t);
	if (t == NULL)
		abort();
	for (size_t i = 0; i < table_cap; i++) {
		for (node *n = table[i], *next; n != NULL; n = next) {
			next = n->next;
			size_t j = slot_of(n->actor.id, cap);
			n->next = t[j];
			t[j] = n;
		}
	}
	free(table);
	table = t;
	table_cap = cap;
}

static node **find(uint64_t id) {
	if (table_cap == 0)
		return NULL;
	node **p = &table[slot_of(id, table_cap)];
	while (*p != NULL && (*p)->actor.id != id)
		p = &(*p)->next;
	return p;
}

/* enter makes the actor id the current one, making its object at its
 * first event on this guest. */
static void enter(uint64_t id) {
	if (current != NULL && current->id == id)
		return;
	node **p = find(id);
	if (p != NULL && *p != NULL) {
		current = &(*p)->actor;
		return;
	}
	int32_t len = wasmkeep_host_event_actor_len();
	if (len < 0)
		abort();
	node *n = malloc(sizeof *n + (size_t)len);
	if (n == NULL || wasmkeep_host_event_actor_read(n->names, (uint32_t)len) != len)
		abort();
	wk_reader r = wk_reader_of((wk_str){n->names, (size_t)len});
	n->actor = (wk_actor){.id = id};
	n->actor.class_name = wk_read_string(&r);
	n->actor.name = wk_read_string(&r);
	if (!wk_read_done(&r))
		abort();
	if (table_len + 1 > table_cap)
		resize(table_cap ? table_cap * 2 : 16);
	size_t j = slot_of(id, table_cap);
	n->next = table[j];
	table[j] = n;
	table_len++;
	current = &n->actor;
}

wk_actor *wk_current(void) { return current; }

size_t wk_actors(void) { return table_len; }

void wk_set_leave_handler(wk_leave_handler h) { leave_handler = h; }

/* The export the host calls when an actor leaves memory: its object is
 * dropped, after the leave handler has seen it. */
int32_t wasmkeep_on_leave(uint64_t actor);
__attribute__((export_name("wasmkeep_on_leave"))) int32_t wasmkeep_on_leave(uint64_t actor) {
	node **p = find(actor);
	if (p == NULL || *p == NULL)
		return WK_OK;
	node *n = *p;
	if (leave_handler != NULL) {
		current = &n->actor;
		leave_handler(&n->actor);
		arena_reset();
	}
	current = NULL;
	*p = n->next;
	free(n);
	if (--table_len < table_cap / 8 && table_cap > 16)
		resize(table_cap / 2);
	return WK_OK;
}

wk_response *wk_rollback(wk_response *resp) {
	wasmkeep_host_event_rollback();
	return resp;
}

int32_t wk_serve_request(uint64_t actor, wk_request_handler h) {
	enter(actor);
	int32_t code = WK_FAILED;
	wk_request req;
	if (read_request(read_host(wasmkeep_host_request_len(), wasmkeep_host_request_read), &req)) {
		wk_response *resp = h(&req);
		if (resp != NULL) {
			wk_buf b = {0};
			write_response(&b, resp);
			if (wasmkeep_host_response_write(b.ptr, (uint32_t)b.len) == 0)
				code = WK_OK;
		}
	}
	arena_reset();
	return code;
}

/* ---- WebSockets ---- */

enum { FLAG_TEXT = 1 << 0, FLAG_CLEAN = 1 << 1 };

static uint32_t text_flag(bool text) { return text ? FLAG_TEXT : 0; }

wk_response *wk_accept(const wk_str *tags, size_t n_tags) {
	wk_buf b = {0};
	wk_buf_u32(&b, (uint32_t)n_tags);
	for (size_t i = 0; i < n_tags; i++)
		wk_buf_string(&b, tags[i]);
	if (wasmkeep_host_ws_accept(b.ptr, (uint32_t)b.len) != 0)
		return wk_text(500, WK_STR("wasmkeep: websocket accept refused (bad tags, or not a request)\n"));
	/* The host answers with the upgrade, whatever the response says. */
	return wk_response_new(101);
}

void wk_ws_send(uint64_t id, bool text, wk_str data) {
	wasmkeep_host_ws_send(id, text_flag(text), data.ptr, (uint32_t)data.len);
}

void wk_ws_broadcast(wk_str tag, bool text, wk_str data) {
	wasmkeep_host_ws_broadcast(tag.ptr, (uint32_t)tag.len, text_flag(text), data.ptr, (uint32_t)data.len);
}

void wk_ws_close(uint64_t id, int32_t code, wk_str reason) {
	if (wasmkeep_host_ws_close(id, code, reason.ptr, (uint32_t)reason.len) != 0)
		wasmkeep_host_ws_close(id, 1011, "", 0);
}

/* read_tags reads a count of strings, then each, into the arena. */
static const wk_str *read_tags(wk_reader *r, size_t *n) {
	uint32_t nt = wk_read_count(r, 4);
	*n = nt;
	if (nt == 0)
		return NULL;
	wk_str *tags = wk_alloc(nt * sizeof *tags);
	for (uint32_t j = 0; j < nt; j++)
		tags[j] = wk_read_string(r);
	return tags;
}

/* Minor version 2 adds a dialed socket's URL (and tags) to the socket
 * list and events; the host sends them to a module of that minor only. */
#define WK_DIAL_FIELDS (WASMKEEP_ABI_MINOR >= 2)

size_t wk_ws_list(wk_str tag, const wk_socket **list) {
	wk_str in = read_host(wasmkeep_host_ws_list_len(tag.ptr, (uint32_t)tag.len), wasmkeep_host_ws_list_read);
	wk_reader r = wk_reader_of(in);
	/* A socket is at least an id, a tag count and an attachment length
	 * (and a URL length). */
	uint32_t n = wk_read_count(&r, WK_DIAL_FIELDS ? 20 : 16);
	wk_socket *s = n > 0 ? wk_alloc(n * sizeof *s) : NULL;
	for (uint32_t i = 0; i < n; i++) {
		s[i].id = wk_read_u64(&r);
		s[i].tags = read_tags(&r, &s[i].n_tags);
		s[i].attachment = wk_read_string(&r);
#if WK_DIAL_FIELDS
		s[i].url = wk_read_string(&r);
#endif
	}
	if (!wk_read_done(&r))
		abort();
	*list = s;
	return n;
}

int wk_ws_set_attachment(uint64_t id, wk_str data) {
	return wasmkeep_host_ws_attachment_set(id, data.ptr, (uint32_t)data.len) != 0;
}

bool wk_ws_attachment(uint64_t id, wk_str *data) {
	int32_t n = wasmkeep_host_ws_attachment_len(id);
	if (n < 0)
		return false;
	*data = read_host(n, wasmkeep_host_ws_attachment_read);
	return true;
}

int wk_ws_set_auto_response(wk_str req, wk_str resp) {
	return wasmkeep_host_ws_auto_response(req.ptr, (uint32_t)req.len, resp.ptr, (uint32_t)resp.len) != 0;
}

int64_t wk_ws_last_auto_response(uint64_t id) { return wasmkeep_host_ws_last_auto_response(id); }

static bool read_socket_event(wk_str in, wk_socket_event *ev) {
	wk_reader r = wk_reader_of(in);
	*ev = (wk_socket_event){0};
	ev->kind = wk_read_u8(&r);
	ev->socket = wk_read_u64(&r);
	uint8_t flags = wk_read_u8(&r);
	ev->code = (int32_t)wk_read_u32(&r);
	ev->data = wk_read_string(&r);
#if WK_DIAL_FIELDS
	ev->url = wk_read_string(&r);
	ev->tags = read_tags(&r, &ev->n_tags);
#endif
	ev->text = ev->kind == WK_SOCKET_MESSAGE && (flags & FLAG_TEXT) != 0;
	ev->clean = ev->kind == WK_SOCKET_CLOSE && (flags & FLAG_CLEAN) != 0;
	return wk_read_done(&r);
}

int32_t wk_serve_socket(uint64_t actor, wk_socket_handler h) {
	enter(actor);
	int32_t code = WK_FAILED;
	wk_socket_event ev;
	if (read_socket_event(read_host(wasmkeep_host_socket_event_len(), wasmkeep_host_socket_event_read), &ev) &&
	    h(&ev) == 0)
		code = WK_OK;
	arena_reset();
	return code;
}

/* ---- Alarms ---- */

static bool read_alarm(wk_reader *r, wk_alarm *a) {
	a->name = wk_read_string(r);
	a->at_ms = (int64_t)wk_read_u64(r);
	a->retry = wk_read_u32(r);
	return true;
}

int wk_alarm_set(wk_str name, int64_t at_ms) {
	return wasmkeep_host_alarm_set(name.ptr, (uint32_t)name.len, at_ms);
}

bool wk_alarm_get(wk_str name, int64_t *at_ms) {
	int64_t at = wasmkeep_host_alarm_get(name.ptr, (uint32_t)name.len);
	if (at < 0)
		return false;
	*at_ms = at;
	return true;
}

int wk_alarm_delete(wk_str name) { return wasmkeep_host_alarm_delete(name.ptr, (uint32_t)name.len); }

const wk_alarm *wk_alarm_list(size_t *n) {
	wk_reader r = wk_reader_of(read_host(wasmkeep_host_alarm_list_len(), wasmkeep_host_alarm_list_read));
	uint32_t count = wk_read_u32(&r);
	wk_alarm *out = wk_alloc(count * sizeof(wk_alarm) + 1);
	for (uint32_t i = 0; i < count; i++)
		read_alarm(&r, &out[i]);
	if (!wk_read_done(&r))
		abort();
	*n = count;
	return out;
}

int32_t wk_serve_alarm(uint64_t actor, wk_alarm_handler h) {
	enter(actor);
	int32_t code = WK_FAILED;
	wk_reader r = wk_reader_of(read_host(wasmkeep_host_alarm_event_len(), wasmkeep_host_alarm_event_read));
	wk_alarm a;
	if (read_alarm(&r, &a) && wk_read_done(&r) && h(&a) == 0)
		code = WK_OK;
	arena_reset();
	return code;
}

/* ---- Storage ---- */

bool wk_storage_get(wk_str key, wk_str *value) {
	int32_t n = wasmkeep_host_storage_get_len(key.ptr, (uint32_t)key.len);
	if (n < 0)
		return false;
	*value = read_host(n, wasmkeep_host_storage_get_read);
	return true;
}

int wk_storage_put(wk_str key, wk_str value) {
	return wasmkeep_host_storage_put(key.ptr, (uint32_t)key.len, value.ptr, (uint32_t)value.len) == 0 ? WK_STORED
	                                                                                                   : WK_LIMIT;
}

void wk_storage_delete(wk_str key) { wasmkeep_host_storage_delete(key.ptr, (uint32_t)key.len); }

enum { LIST_REVERSE = 1 << 0, BATCH_PUT = 1, BATCH_DELETE = 2 };

int32_t wk_storage_list(const wk_list_options *opt, const wk_entry **entries) {
	wk_buf b = {0};
	wk_buf_string(&b, opt->prefix);
	wk_buf_string(&b, opt->start);
	wk_buf_string(&b, opt->end);
	wk_buf_u32(&b, opt->limit);
	wk_buf_u32(&b, opt->reverse ? LIST_REVERSE : 0);
	int32_t n = wasmkeep_host_storage_list_len(b.ptr, (uint32_t)b.len);
	if (n < 0)
		return -1;
	wk_reader r = wk_reader_of(read_host(n, wasmkeep_host_storage_list_read));
	uint32_t count = wk_read_count(&r, 8);
	wk_entry *e = count > 0 ? wk_alloc(count * sizeof *e) : NULL;
	for (uint32_t i = 0; i < count; i++) {
		e[i].key = wk_read_string(&r);
		e[i].value = wk_read_string(&r);
	}
	if (!wk_read_done(&r) || count > INT32_MAX)
		abort();
	*entries = e;
	return (int32_t)count;
}

/* batch_op appends one operation of a batch (ABI.md): its kind, its key
 * and, for a put, its value. */
static void batch_op(wk_buf *b, bool del, wk_str key, wk_str value) {
	wk_buf_u8(b, del ? BATCH_DELETE : BATCH_PUT);
	wk_buf_string(b, key);
	if (!del)
		wk_buf_string(b, value);
}

/* batch_apply hands the host a batch that batch_op laid out. */
static int batch_apply(const wk_buf *b) {
	return wasmkeep_host_storage_batch(b->ptr, (uint32_t)b->len) == 0 ? WK_STORED : WK_LIMIT;
}

int wk_storage_batch(const wk_op *ops, size_t n_ops) {
	wk_buf b = {0};
	wk_buf_u32(&b, (uint32_t)n_ops);
	for (size_t i = 0; i < n_ops; i++)
		batch_op(&b, ops[i].del, ops[i].key, ops[i].value);
	return batch_apply(&b);
}

int wk_storage_put_many(const wk_entry *entries, size_t n_entries) {
	wk_buf b = {0};
	wk_buf_u32(&b, (uint32_t)n_entries);
	for (size_t i = 0; i < n_entries; i++)
		batch_op(&b, false, entries[i].key, entries[i].value);
	return batch_apply(&b);
}

size_t wk_storage_get_many(const wk_str *keys, size_t n_keys, wk_str *values, bool *found) {
	size_t n_found = 0;
	for (size_t off = 0; off < n_keys; off += WK_MAX_GET_KEYS) {
		size_t n = n_keys - off < WK_MAX_GET_KEYS ? n_keys - off : WK_MAX_GET_KEYS;
		wk_buf b = {0};
		wk_buf_u32(&b, (uint32_t)n);
		for (size_t i = 0; i < n; i++)
			wk_buf_string(&b, keys[off + i]);
		/* Per key: a found byte, then the value if found. */
		wk_reader r = wk_reader_of(read_host(wasmkeep_host_storage_get_many_len(b.ptr, (uint32_t)b.len),
		                                     wasmkeep_host_storage_get_many_read));
		if (wk_read_u32(&r) != n)
			abort();
		for (size_t i = 0; i < n; i++) {
			uint8_t has = wk_read_u8(&r);
			if (has > 1)
				abort();
			values[off + i] = has ? wk_read_string(&r) : (wk_str){"", 0};
			if (found != NULL)
				found[off + i] = has != 0;
			n_found += has;
		}
		if (!wk_read_done(&r))
			abort();
	}
	return n_found;
}

int wk_storage_delete_all(void) { return wasmkeep_host_storage_delete_all() != 0; }

/* ---- SQL ---- */

enum { SQL_FLAG_EXEC = 1 << 0 };

wk_sql_value wk_sql_null(void) { return (wk_sql_value){.type = WK_SQL_NULL}; }

wk_sql_value wk_sql_int(int64_t v) { return (wk_sql_value){.type = WK_SQL_INTEGER, .i = v}; }

wk_sql_value wk_sql_float(double v) { return (wk_sql_value){.type = WK_SQL_FLOAT, .f = v}; }

wk_sql_value wk_sql_text(wk_str v) { return (wk_sql_value){.type = WK_SQL_TEXT, .s = v}; }

wk_sql_value wk_sql_blob(wk_str v) { return (wk_sql_value){.type = WK_SQL_BLOB, .s = v}; }

static void write_sql_value(wk_buf *b, const wk_sql_value *v) {
	wk_buf_u8(b, v->type);
	switch (v->type) {
	case WK_SQL_INTEGER:
		wk_buf_u64(b, (uint64_t)v->i);
		break;
	case WK_SQL_FLOAT: {
		uint64_t bits;
		memcpy(&bits, &v->f, sizeof bits);
		wk_buf_u64(b, bits);
		break;
	}
	case WK_SQL_TEXT:
	case WK_SQL_BLOB:
		wk_buf_string(b, v->s);
		break;
	}
}

static bool read_sql_value(wk_reader *r, wk_sql_value *v) {
	*v = (wk_sql_value){.type = wk_read_u8(r)};
	switch (v->type) {
	case WK_SQL_NULL:
		break;
	case WK_SQL_INTEGER:
		v->i = (int64_t)wk_read_u64(r);
		break;
	case WK_SQL_FLOAT: {
		uint64_t bits = wk_read_u64(r);
		memcpy(&v->f, &bits, sizeof bits);
		break;
	}
	case WK_SQL_TEXT:
	case WK_SQL_BLOB:
		v->s = wk_read_string(r);
		break;
	default:
		return false;
	}
	return !r->err;
}

/* sql_run runs one statement in one host call and reads its result's
 * header into res; the rows stay encoded, for wk_sql_next. */
static int sql_run(wk_str query, const wk_sql_value *args, size_t n_args, uint32_t flags, wk_sql_result *res) {
	wk_buf b = {0};
	wk_buf_string(&b, query);
	wk_buf_u32(&b, (uint32_t)n_args);
	for (size_t i = 0; i < n_args; i++)
		write_sql_value(&b, &args[i]);
	wk_buf_u32(&b, flags);
	wk_reader r = wk_reader_of(read_host(wasmkeep_host_sql_exec_len(b.ptr, (uint32_t)b.len), wasmkeep_host_sql_exec_read));
	*res = (wk_sql_result){0};
	uint8_t status = wk_read_u8(&r);
	if (status == WK_SQL_ERROR || status == WK_SQL_LIMIT) {
		res->error = wk_read_string(&r);
		if (!wk_read_done(&r))
			abort();
		return status;
	}
	if (status != WK_SQL_OK)
		abort();
	res->changes = (int64_t)wk_read_u64(&r);
	res->last_id = (int64_t)wk_read_u64(&r);
	uint32_t n = wk_read_count(&r, 4);
	wk_str *cols = n > 0 ? wk_alloc(n * sizeof *cols) : NULL;
	for (uint32_t i = 0; i < n; i++)
		cols[i] = wk_read_string(&r);
	res->columns = cols;
	res->n_columns = n;
	/* A row takes at least a byte a value. */
	res->n_rows = res->left = wk_read_count(&r, n > 0 ? n : 1);
	if (r.err || (n == 0 && res->n_rows > 0) || (res->n_rows == 0 && !wk_read_done(&r)))
		abort();
	res->row = n > 0 ? wk_alloc(n * sizeof *res->row) : NULL;
	res->rest = r;
	return WK_SQL_OK;
}

int wk_sql_exec(wk_str query, const wk_sql_value *args, size_t n_args, wk_sql_result *res) {
	wk_sql_result ignored;
	return sql_run(query, args, n_args, SQL_FLAG_EXEC, res != NULL ? res : &ignored);
}

int wk_sql_query(wk_str query, const wk_sql_value *args, size_t n_args, wk_sql_result *res) {
	return sql_run(query, args, n_args, 0, res);
}

const wk_sql_value *wk_sql_next(wk_sql_result *res) {
	if (res->left == 0)
		return NULL;
	for (size_t i = 0; i < res->n_columns; i++)
		if (!read_sql_value(&res->rest, &res->row[i]))
			abort();
	if (--res->left == 0 && !wk_read_done(&res->rest))
		abort();
	return res->row;
}

/* ---- Logs, calls, time ---- */

void wk_log(int level, wk_str msg) { wasmkeep_host_log(level, msg.ptr, (uint32_t)msg.len); }

int wk_call(wk_str class_name, wk_str name, const wk_request *req, wk_response **resp) {
	wk_buf target = {0}, enc = {0};
	wk_buf_string(&target, class_name);
	wk_buf_string(&target, name);
	write_request(&enc, req);
	int32_t n = wasmkeep_host_actor_call(target.ptr, (uint32_t)target.len, enc.ptr, (uint32_t)enc.len);
	if (n < 0)
		return n >= WK_CALL_FAILED ? n : WK_CALL_FAILED;
	wk_response *r = wk_response_new(0);
	if (!read_response(read_host(n, wasmkeep_host_actor_call_read), r))
		return WK_CALL_FAILED;
	*resp = r;
	return 0;
}

int64_t wk_ws_dial(wk_str url, const wk_field *headers, size_t n_headers, const wk_str *tags, size_t n_tags) {
	wk_buf enc = {0};
	wk_buf_string(&enc, url);
	write_fields(&enc, headers, n_headers);
	wk_buf_u32(&enc, (uint32_t)n_tags);
	for (size_t i = 0; i < n_tags; i++)
		wk_buf_string(&enc, tags[i]);
	int64_t id = wasmkeep_host_ws_dial(enc.ptr, (uint32_t)enc.len);
	if (id < WK_DIAL_NO_SOCKETS)
		return WK_DIAL_FAILED;
	return id;
}

bool wk_ws_dialed(uint64_t id) { return (id & ((uint64_t)1 << 62)) != 0; }

int wk_fetch(const wk_fetch_request *req, wk_response **resp) {
	wk_buf enc = {0};
	wk_buf_string(&enc, req->method);
	wk_buf_string(&enc, req->url);
	write_fields(&enc, req->headers, req->n_headers);
	wk_buf_string(&enc, req->body);
	int32_t n = wasmkeep_host_http_fetch(enc.ptr, (uint32_t)enc.len);
	if (n < 0)
		return n >= WK_FETCH_FAILED ? n : WK_FETCH_FAILED;
	wk_response *r = wk_response_new(0);
	if (!read_response(read_host(n, wasmkeep_host_http_fetch_read), r))
		return WK_FETCH_FAILED;
	*resp = r;
	return 0;
}

int64_t wk_now_ms(void) {
	struct timespec ts;
	if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
		return 0;
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- Secrets ---- */

bool wk_secret(wk_str name, wk_str *value) {
	int32_t n = wasmkeep_host_secret_len(name.ptr, (uint32_t)name.len);
	if (n < 0)
		return false;
	*value = read_host(n, wasmkeep_host_secret_read);
	return true;
}
