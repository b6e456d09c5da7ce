/*
 * wasmkeep.h: the C SDK of the wasmkeep guest ABI (wasmhost/ABI.md).
 *
 * A class is a WASI reactor that includes this header, is linked with
 * wasmkeep.c, and registers its handlers with WK_HANDLE_REQUEST and
 * WK_HANDLE_SOCKET (README.md beside this file shows a whole class).
 *
 * Memory. Everything the SDK returns (requests, values, lists, buffers,
 * responses) lives in the event's arena and is freed when the event ends:
 * a class never frees it. What a class keeps from one of an actor's events
 * to the next goes in the actor's object (wk_current()->data), as a cache
 * of its storage: the host may discard the guest after any event.
 *
 * Actors. Every event names its actor; the SDK keeps one wk_actor per
 * actor the guest serves, made at the actor's first event there and
 * dropped when the host says the actor left memory (after the handler of
 * WK_HANDLE_LEAVE, if any, has seen it). A guest is the class's module
 * instantiated: a class declares with WK_ISOLATION(WK_ISOLATION_CLASS)
 * that its actors share a few guests, each serving many of them one event
 * at a time; without it, each resident actor has a guest of its own.
 * Static variables are shared by the actors of a guest.
 *
 * Bytes are wk_str: a pointer and a length, not NUL-terminated. Running
 * out of memory, or a malformed encoding from the host, traps: the event
 * fails with 500 and the guest is discarded.
 */
#ifndef WASMKEEP_H
#define WASMKEEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The ABI version the SDK speaks; the export wasmkeep_abi_version returns
 * it. Define it otherwise only to see a host refuse the module.
 */
#ifndef WASMKEEP_ABI_VERSION
#define WASMKEEP_ABI_VERSION 2
#endif
/*
 * The minor version (wasmkeep_abi_minor): 1 has alarms and outbound HTTP,
 * 2 outbound WebSockets (wk_ws_dial) and a dialed socket's URL and tags in
 * socket events and lists. The host lays events out as the module's minor
 * version has them; built with 1, the SDK reads them as minor 1 did (and
 * the URL and tags stay empty).
 */
#ifndef WASMKEEP_ABI_MINOR
#define WASMKEEP_ABI_MINOR 2
#endif

/* ---- Host functions: module "wasmkeep", as ABI.md lists them ---- */

#define WK_IMPORT(name) __attribute__((import_module("wasmkeep"), import_name(#name)))

WK_IMPORT(abi_version) int32_t wasmkeep_host_abi_version(void);
WK_IMPORT(event_actor_len) int32_t wasmkeep_host_event_actor_len(void);
WK_IMPORT(event_actor_read) int32_t wasmkeep_host_event_actor_read(void *ptr, uint32_t len);
WK_IMPORT(request_len) int32_t wasmkeep_host_request_len(void);
WK_IMPORT(request_read) int32_t wasmkeep_host_request_read(void *ptr, uint32_t len);
WK_IMPORT(response_write) int32_t wasmkeep_host_response_write(const void *ptr, uint32_t len);
WK_IMPORT(event_rollback) void wasmkeep_host_event_rollback(void);
WK_IMPORT(storage_get_len) int32_t wasmkeep_host_storage_get_len(const void *key, uint32_t key_len);
WK_IMPORT(storage_get_read) int32_t wasmkeep_host_storage_get_read(void *ptr, uint32_t len);
WK_IMPORT(storage_put)
int32_t wasmkeep_host_storage_put(const void *key, uint32_t key_len, const void *val, uint32_t val_len);
WK_IMPORT(storage_delete) void wasmkeep_host_storage_delete(const void *key, uint32_t key_len);
WK_IMPORT(storage_list_len) int32_t wasmkeep_host_storage_list_len(const void *opts, uint32_t opts_len);
WK_IMPORT(storage_list_read) int32_t wasmkeep_host_storage_list_read(void *ptr, uint32_t len);
WK_IMPORT(storage_batch) int32_t wasmkeep_host_storage_batch(const void *ptr, uint32_t len);
WK_IMPORT(storage_get_many_len) int32_t wasmkeep_host_storage_get_many_len(const void *keys, uint32_t keys_len);
WK_IMPORT(storage_get_many_read) int32_t wasmkeep_host_storage_get_many_read(void *ptr, uint32_t len);
WK_IMPORT(storage_delete_all) int32_t wasmkeep_host_storage_delete_all(void);
WK_IMPORT(sql_exec_len) int32_t wasmkeep_host_sql_exec_len(const void *stmt, uint32_t stmt_len);
WK_IMPORT(sql_exec_read) int32_t wasmkeep_host_sql_exec_read(void *ptr, uint32_t len);
WK_IMPORT(log) void wasmkeep_host_log(int32_t level, const void *msg, uint32_t msg_len);
WK_IMPORT(ws_accept) int32_t wasmkeep_host_ws_accept(const void *tags, uint32_t tags_len);
WK_IMPORT(ws_send) int32_t wasmkeep_host_ws_send(uint64_t id, uint32_t flags, const void *ptr, uint32_t len);
WK_IMPORT(ws_broadcast)
int32_t wasmkeep_host_ws_broadcast(const void *tag, uint32_t tag_len, uint32_t flags, const void *ptr, uint32_t len);
WK_IMPORT(ws_close)
int32_t wasmkeep_host_ws_close(uint64_t id, int32_t code, const void *reason, uint32_t reason_len);
WK_IMPORT(ws_list_len) int32_t wasmkeep_host_ws_list_len(const void *tag, uint32_t tag_len);
WK_IMPORT(ws_list_read) int32_t wasmkeep_host_ws_list_read(void *ptr, uint32_t len);
WK_IMPORT(ws_attachment_set) int32_t wasmkeep_host_ws_attachment_set(uint64_t id, const void *ptr, uint32_t len);
WK_IMPORT(ws_attachment_len) int32_t wasmkeep_host_ws_attachment_len(uint64_t id);
WK_IMPORT(ws_attachment_read) int32_t wasmkeep_host_ws_attachment_read(void *ptr, uint32_t len);
WK_IMPORT(ws_auto_response)
int32_t wasmkeep_host_ws_auto_response(const void *req, uint32_t req_len, const void *resp, uint32_t resp_len);
WK_IMPORT(ws_last_auto_response) int64_t wasmkeep_host_ws_last_auto_response(uint64_t id);
WK_IMPORT(socket_event_len) int32_t wasmkeep_host_socket_event_len(void);
WK_IMPORT(socket_event_read) int32_t wasmkeep_host_socket_event_read(void *ptr, uint32_t len);
WK_IMPORT(actor_call)
int32_t wasmkeep_host_actor_call(const void *target, uint32_t target_len, const void *req, uint32_t req_len);
WK_IMPORT(actor_call_read) int32_t wasmkeep_host_actor_call_read(void *ptr, uint32_t len);
WK_IMPORT(http_fetch) int32_t wasmkeep_host_http_fetch(const void *req, uint32_t req_len);
WK_IMPORT(http_fetch_read) int32_t wasmkeep_host_http_fetch_read(void *ptr, uint32_t len);
WK_IMPORT(ws_dial) int64_t wasmkeep_host_ws_dial(const void *req, uint32_t req_len);
WK_IMPORT(alarm_set) int32_t wasmkeep_host_alarm_set(const void *name, uint32_t name_len, int64_t at_ms);
WK_IMPORT(alarm_get) int64_t wasmkeep_host_alarm_get(const void *name, uint32_t name_len);
WK_IMPORT(alarm_delete) int32_t wasmkeep_host_alarm_delete(const void *name, uint32_t name_len);
WK_IMPORT(alarm_list_len) int32_t wasmkeep_host_alarm_list_len(void);
WK_IMPORT(alarm_list_read) int32_t wasmkeep_host_alarm_list_read(void *ptr, uint32_t len);
WK_IMPORT(alarm_event_len) int32_t wasmkeep_host_alarm_event_len(void);
WK_IMPORT(alarm_event_read) int32_t wasmkeep_host_alarm_event_read(void *ptr, uint32_t len);
WK_IMPORT(secret_len) int32_t wasmkeep_host_secret_len(const void *name, uint32_t name_len);
WK_IMPORT(secret_read) int32_t wasmkeep_host_secret_read(void *ptr, uint32_t len);

/* Return codes of the exports wasmkeep_on_request, wasmkeep_on_socket and
 * wasmkeep_on_leave. */
enum { WK_OK = 0, WK_FAILED = 1, WK_NOT_HANDLED = 2 };

/* Isolations a class declares with WK_ISOLATION. */
enum { WK_ISOLATION_ACTOR = 1, WK_ISOLATION_CLASS = 2 };

/* ---- Bytes, the event's arena, buffers ---- */

typedef struct {
	const char *ptr;
	size_t len;
} wk_str;

/* WK_STR makes a wk_str of a string literal (not of a pointer). */
#define WK_STR(lit) ((wk_str){(lit), sizeof(lit) - 1})

wk_str wk_cstr(const char *s);
bool wk_str_eq(wk_str a, wk_str b);
/* wk_str_eq_fold compares ASCII letters case-insensitively. */
bool wk_str_eq_fold(wk_str a, wk_str b);
bool wk_str_has_prefix(wk_str s, wk_str prefix);

/* wk_alloc returns n zeroed bytes that live until the event ends. */
void *wk_alloc(size_t n);
/* wk_dup copies s into the arena. */
wk_str wk_dup(wk_str s);

/* wk_buf is a growable byte buffer in the arena; the zero value is empty. */
typedef struct {
	char *ptr;
	size_t len, cap;
} wk_buf;

void wk_buf_write(wk_buf *b, const void *p, size_t n);
void wk_buf_write_str(wk_buf *b, wk_str s);
void wk_buf_write_cstr(wk_buf *b, const char *s);
void wk_buf_write_byte(wk_buf *b, uint8_t c);
/* wk_buf_write_int writes v in decimal. */
void wk_buf_write_int(wk_buf *b, int64_t v);
wk_str wk_buf_str(const wk_buf *b);

/* The ABI's encodings: little-endian integers, strings as a u32 length
 * then the bytes. */
void wk_buf_u8(wk_buf *b, uint8_t v);
void wk_buf_u32(wk_buf *b, uint32_t v);
void wk_buf_u64(wk_buf *b, uint64_t v);
void wk_buf_string(wk_buf *b, wk_str s);

/*
 * wk_reader decodes front to back. After the first short read every read
 * returns zero values and err is set, so a decoder checks once, at its
 * end. Strings point into the decoded bytes.
 */
typedef struct {
	const uint8_t *p;
	size_t len, off;
	bool err;
} wk_reader;

wk_reader wk_reader_of(wk_str b);
uint8_t wk_read_u8(wk_reader *r);
uint32_t wk_read_u32(wk_reader *r);
uint64_t wk_read_u64(wk_reader *r);
wk_str wk_read_string(wk_reader *r);
/* wk_read_count reads a count of items each at least min_size bytes long;
 * one the remaining bytes cannot hold is an error (so that a bad count
 * never makes a huge allocation). */
uint32_t wk_read_count(wk_reader *r, size_t min_size);
/* wk_read_done reports whether everything was read without error: an
 * encoding with bytes left over is malformed too. */
bool wk_read_done(const wk_reader *r);

/* ---- HTTP events ---- */

/* wk_field is one header: a name and one value. */
typedef struct {
	wk_str name, value;
} wk_field;

typedef struct {
	wk_str method;
	/* path is what follows /actor/<class>/<name>, unescaped: "" or "/...". */
	wk_str path;
	/* query is the query string without '?', still escaped, keys sorted. */
	wk_str query;
	/* headers: names canonical ("Content-Type"), sorted by name; a header
	 * with several values appears once per value. */
	const wk_field *headers;
	size_t n_headers;
	wk_str body;
} wk_request;

/* wk_header finds the first value of header name (ASCII case-insensitive). */
bool wk_header(const wk_request *r, const char *name, wk_str *value);
/* wk_query finds the first value of query parameter key, both unescaped
 * ('+' is a space, %XX a byte; a malformed %XX is kept as is). */
bool wk_query(const wk_request *r, const char *key, wk_str *value);

typedef struct {
	/* status: 0 means 200; otherwise 100 to 999. */
	uint32_t status;
	wk_field *headers;
	size_t n_headers, cap_headers;
	wk_str body;
} wk_response;

wk_response *wk_response_new(uint32_t status);
void wk_response_header(wk_response *resp, const char *name, wk_str value);
/* wk_text is a text/plain response. */
wk_response *wk_text(uint32_t status, wk_str body);

/* A request handler returns the response, or NULL to fail the event (500). */
typedef wk_response *(*wk_request_handler)(const wk_request *req);

/*
 * wk_rollback rolls the running event back and returns resp, for the
 * request handler to return: the client gets resp (status, headers, body),
 * and the event's storage writes and what it queued on sockets (sends,
 * broadcasts, closes) are discarded, as for a failed event. It is no
 * failure: the guest is kept. What took effect at once stays
 * (attachments, auto-responses, the writes committed before an earlier
 * wk_call); a wk_call after it returns WK_CALL_BAD. It cannot be undone,
 * and does not undo what the event changed in memory (an actor's data):
 * mend what caches the discarded writes. A NULL resp, or wk_accept's,
 * fails the event with 500. In a socket handler, call wk_rollback(NULL)
 * and return 0: the writes and output are discarded, the socket stays
 * open.
 */
wk_response *wk_rollback(wk_response *resp);

/* ---- WebSockets ---- */

enum { WK_SOCKET_MESSAGE = 1, WK_SOCKET_CLOSE = 2, WK_SOCKET_ERROR = 3 };

/* Limits the host checks (ABI.md). */
enum {
	WK_MAX_TAGS = 10,
	WK_MAX_TAG_BYTES = 256,
	WK_MAX_ATTACHMENT = 16384,
	WK_MAX_CLOSE_REASON = 123,
};

typedef struct {
	uint8_t kind;
	uint64_t socket;
	bool text;    /* a message: text, not binary */
	bool clean;   /* a close: the close handshake ran */
	int32_t code; /* a close: the peer's code (1006 without a close frame);
	                 an error: the code the node closed the socket with */
	wk_str data;  /* a message: its bytes; a close: the reason; an error:
	                 what went wrong */
	/* The close or error of a socket the actor dialed (wk_ws_dial): the URL
	 * and tags it was dialed with, to dial again; empty otherwise. */
	wk_str url;
	const wk_str *tags;
	size_t n_tags;
} wk_socket_event;

/* A socket handler returns 0, or anything else to fail the event. By the
 * time of a close or error event the socket is no longer listed. */
typedef int (*wk_socket_handler)(const wk_socket_event *ev);

/*
 * wk_accept accepts the WebSocket upgrade of the request being served,
 * the socket carrying tags (at most WK_MAX_TAGS, each 1 to
 * WK_MAX_TAG_BYTES bytes). Return its response from the request handler:
 * a 101, or a 500 saying why if the host refused.
 */
wk_response *wk_accept(const wk_str *tags, size_t n_tags);

typedef struct {
	uint64_t id;
	const wk_str *tags;
	size_t n_tags;
	wk_str attachment; /* empty if none */
	wk_str url;        /* a dialed socket's URL; empty for an accepted one */
} wk_socket;

/* Sends, broadcasts and closes go out with the event's output, once its
 * writes are durable, and not at all if it fails. */
void wk_ws_send(uint64_t id, bool text, wk_str data);
/* wk_ws_broadcast sends to every open socket carrying tag (every socket
 * for an empty tag). */
void wk_ws_broadcast(wk_str tag, bool text, wk_str data);
/* wk_ws_close closes with code and reason; a code that cannot be sent or
 * a reason over WK_MAX_CLOSE_REASON bytes closes with 1011 and no reason. */
void wk_ws_close(uint64_t id, int32_t code, wk_str reason);
/* wk_ws_list lists the open sockets carrying tag (all for an empty tag),
 * in the order they were accepted (the dialed ones after), and returns how
 * many. */
size_t wk_ws_list(wk_str tag, const wk_socket **list);
/* wk_ws_set_attachment keeps data with the socket until it closes, across
 * guests and hibernation; empty removes it. Immediate. Returns 0, or 1 if
 * over WK_MAX_ATTACHMENT bytes or the socket is gone. */
int wk_ws_set_attachment(uint64_t id, wk_str data);
/* wk_ws_attachment finds the socket's attachment: false if it has none
 * (or an empty one) or is gone. */
bool wk_ws_attachment(uint64_t id, wk_str *data);
/* wk_ws_set_auto_response makes the node answer a text message equal to
 * req with resp, without an event; both empty remove it. Returns 0, or 1
 * if refused. */
int wk_ws_set_auto_response(wk_str req, wk_str resp);
/* wk_ws_last_auto_response: Unix milliseconds of the socket's last
 * auto-response, 0 if never, -1 if the socket is gone. */
int64_t wk_ws_last_auto_response(uint64_t id);

/* Refusals and failures of wk_ws_dial (ABI.md, ws_dial). */
enum {
	WK_DIAL_BAD = -1,         /* a bad URL (ws:// or wss:// and a host) or tags, or the event rolled back */
	WK_DIAL_REFUSED = -2,     /* the egress allow-list (wasmkeep serve --egress-allow) */
	WK_DIAL_LIMIT = -3,       /* the actor has WK_MAX_DIALED outbound sockets open */
	WK_DIAL_UNAVAILABLE = -4, /* the event's writes could not be committed first, or the
	                             node takes no more sockets */
	WK_DIAL_FAILED = -5,      /* no connection, or the service refused the handshake */
	WK_DIAL_NO_SOCKETS = -6,  /* the node serves no WebSockets */
};

enum { WK_MAX_DIALED = 16 };

/*
 * wk_ws_dial opens an outbound WebSocket to url (ws:// or wss://), sending
 * headers with the handshake, the socket carrying tags (as wk_accept's),
 * and returns its id once it is open, or a WK_DIAL_ code. Like wk_fetch it
 * commits the event's writes first. The socket belongs to the node as an
 * accepted one does: its events come to the socket handler. Its close (or
 * error) event comes exactly once, with the URL and tags, at the actor's
 * next wake wherever it is if it closed while the actor was away (1006).
 */
int64_t wk_ws_dial(wk_str url, const wk_field *headers, size_t n_headers, const wk_str *tags, size_t n_tags);
/* wk_ws_dialed says whether a socket id is one the actor dialed. */
bool wk_ws_dialed(uint64_t id);

/* ---- Storage: the actor's own; reads see the event's writes ---- */

/* Results of writes. */
enum { WK_STORED = 0, WK_LIMIT = 1 };

/* wk_storage_get finds the value under key; without one it returns false
 * and leaves *value as it was. */
bool wk_storage_get(wk_str key, wk_str *value);
/* wk_storage_put returns WK_STORED, or WK_LIMIT for an empty or too long
 * key, or a too large value or state. */
int wk_storage_put(wk_str key, wk_str value);
void wk_storage_delete(wk_str key);

typedef struct {
	wk_str prefix, start, end; /* "": no filter, no bound */
	uint32_t limit;            /* 0: all */
	bool reverse;              /* descending; the limit keeps the last keys */
} wk_list_options;

typedef struct {
	wk_str key, value;
} wk_entry;

/* wk_storage_list returns the count of entries, or -1 for options the
 * host refuses (a flag it does not know). */
int32_t wk_storage_list(const wk_list_options *opt, const wk_entry **entries);

enum { WK_MAX_BATCH_OPS = 128 };

typedef struct {
	bool del; /* a delete (value unused), else a put */
	wk_str key, value;
} wk_op;

/* wk_storage_batch applies ops all or nothing: WK_STORED, or WK_LIMIT and
 * none applied. */
int wk_storage_batch(const wk_op *ops, size_t n_ops);
/* wk_storage_put_many puts each entry's key to its value, in order, all or
 * nothing, in one host call: wk_storage_batch with puts only. */
int wk_storage_put_many(const wk_entry *entries, size_t n_entries);

enum { WK_MAX_GET_KEYS = 128 };

/* wk_storage_get_many looks the keys up, in one host call per
 * WK_MAX_GET_KEYS keys: values[i] is the value of keys[i] (empty if it has
 * none) and, unless found is NULL, found[i] whether it has one. It returns
 * how many have one. Like wk_storage_get it sees the event's writes. */
size_t wk_storage_get_many(const wk_str *keys, size_t n_keys, wk_str *values, bool *found);
/* wk_storage_delete_all removes every key of the actor, the event's writes
 * so far included; like every write it commits with the event or not at
 * all. Returns 0, or 1 if the host could not list the keys (none deleted). */
int wk_storage_delete_all(void);

/* ---- SQL: the actor's own database; its writes commit with the event's ---- */

/* Types of SQL values. */
enum { WK_SQL_NULL = 0, WK_SQL_INTEGER = 1, WK_SQL_FLOAT = 2, WK_SQL_TEXT = 3, WK_SQL_BLOB = 4 };

/* wk_sql_value is one SQL value: an argument of a statement, or one of a
 * row's. Make arguments with wk_sql_null, wk_sql_int, wk_sql_float,
 * wk_sql_text and wk_sql_blob. An empty text or blob is not NULL. */
typedef struct {
	uint8_t type; /* a WK_SQL_ type */
	int64_t i;    /* WK_SQL_INTEGER */
	double f;     /* WK_SQL_FLOAT */
	wk_str s;     /* WK_SQL_TEXT (UTF-8), WK_SQL_BLOB */
} wk_sql_value;

wk_sql_value wk_sql_null(void);
wk_sql_value wk_sql_int(int64_t v);
wk_sql_value wk_sql_float(double v);
wk_sql_value wk_sql_text(wk_str v);
wk_sql_value wk_sql_blob(wk_str v);

/* Results of wk_sql_exec and wk_sql_query. */
enum { WK_SQL_OK = 0, WK_SQL_ERROR = 1, WK_SQL_LIMIT = 2 };

/*
 * wk_sql_result is what a statement did. Its rows are read in turn with
 * wk_sql_next, a cursor over the result the host sent.
 */
typedef struct {
	int64_t changes; /* rows inserted, updated or deleted (triggers' too) */
	int64_t last_id; /* rowid of the last row an INSERT of the call inserted, 0 if none */
	const wk_str *columns;
	size_t n_columns;
	size_t n_rows;
	wk_str error; /* WK_SQL_ERROR, WK_SQL_LIMIT: why (the statement, SQLite's message) */
	/* The cursor: the rows not read yet, and the current row. */
	wk_reader rest;
	size_t left;
	wk_sql_value *row;
} wk_sql_result;

/*
 * wk_sql_exec runs query: with arguments one statement, its parameters (?,
 * or numbered or named ones in the order of their first appearance) given
 * in order; without, possibly several statements, run in turn until one
 * fails. Rows are dropped. It returns WK_SQL_OK and res->changes and
 * res->last_id; WK_SQL_ERROR when the database refused the statement (a
 * syntax error, a constraint; BEGIN, since the event is the transaction);
 * or WK_SQL_LIMIT when it would take the actor's state past its bound (a
 * class answers 413). Either way res->error says why, the statement is
 * undone and the event goes on, its other writes kept. res may be NULL.
 */
int wk_sql_exec(wk_str query, const wk_sql_value *args, size_t n_args, wk_sql_result *res);
/*
 * wk_sql_query runs query, one statement, with arguments as wk_sql_exec
 * does, and returns as it does; on WK_SQL_OK res also has the columns and
 * the rows (at most 16 MiB of them, else WK_SQL_ERROR), for wk_sql_next.
 * A statement that writes (INSERT ... RETURNING) is run as wk_sql_exec
 * would run it.
 */
int wk_sql_query(wk_str query, const wk_sql_value *args, size_t n_args, wk_sql_result *res);
/*
 * wk_sql_next returns the next row of res, n_columns values, or NULL past
 * the last. The next call overwrites the values; the texts and blobs they
 * point to live until the event ends.
 */
const wk_sql_value *wk_sql_next(wk_sql_result *res);

/* ---- Logs, calls, time ---- */

enum { WK_DEBUG = -4, WK_INFO = 0, WK_WARN = 4, WK_ERROR = 8 };

void wk_log(int level, wk_str msg);

/* Refusals of wk_call (ABI.md, actor_call). */
enum {
	WK_CALL_BAD = -1,
	WK_CALL_CYCLE = -2,
	WK_CALL_NO_CLASS = -3,
	WK_CALL_UNAVAILABLE = -4,
	WK_CALL_FAILED = -5,
};

/* wk_call sends req to the actor name of class and waits for its answer:
 * 0 and *resp, or a WK_CALL_ code. The event's writes so far are committed
 * before the request leaves. */
int wk_call(wk_str class_name, wk_str name, const wk_request *req, wk_response **resp);

/* Refusals and failures of wk_fetch (ABI.md, http_fetch). */
enum {
	WK_FETCH_BAD = -1,         /* malformed method or URL, or the event rolled back */
	WK_FETCH_REFUSED = -2,     /* the egress allow-list (wasmkeep serve --egress-allow) */
	WK_FETCH_LIMIT = -3,       /* a body over the node's bound */
	WK_FETCH_UNAVAILABLE = -4, /* the event's writes could not be committed first */
	WK_FETCH_FAILED = -5,      /* no answer: a connection, a timeout, redirects */
};

/* wk_fetch_request is an outbound HTTP request: method ("" means GET), an
 * http:// or https:// URL, headers and a body. */
typedef struct {
	wk_str method, url;
	const wk_field *headers;
	size_t n_headers;
	wk_str body;
} wk_fetch_request;

/* wk_fetch sends req to a service outside the cluster and waits for its
 * whole answer: 0 and *resp, or a WK_FETCH_ code. The event's writes so far
 * are committed before the request leaves. */
int wk_fetch(const wk_fetch_request *req, wk_response **resp);

/* ---- Alarms ---- */

/* wk_alarm is one named alarm of the actor: due at at_ms (Unix ms); in an
 * alarm event, retry counts the deliveries that failed before. */
typedef struct {
	wk_str name;
	int64_t at_ms;
	uint32_t retry;
} wk_alarm;

/* Answers of wk_alarm_set and wk_alarm_delete. */
enum { WK_ALARM_OK = 0, WK_ALARM_BAD = -1, WK_ALARM_LIMIT = -2 };

/* wk_alarm_set sets the alarm name to be due at at_ms (a time past is due
 * at once), replacing one of that name: a write of the event, committed
 * with its storage writes. */
int wk_alarm_set(wk_str name, int64_t at_ms);
/* wk_alarm_get finds when the alarm name is due. */
bool wk_alarm_get(wk_str name, int64_t *at_ms);
int wk_alarm_delete(wk_str name);
/* wk_alarm_list lists the actor's alarms, by name, in the event's arena. */
const wk_alarm *wk_alarm_list(size_t *n);

/* An alarm handler returns 0 when it handled the alarm (the alarm ends with
 * the event unless it set it again), nonzero to fail the event (its writes
 * are discarded; the alarm is delivered again later). */
typedef int (*wk_alarm_handler)(const wk_alarm *alarm);

/* wk_now_ms is the time in Unix milliseconds. */
int64_t wk_now_ms(void);

/* ---- Secrets ---- */

/*
 * wk_secret finds the application secret name (an API key, a token: set
 * with `wasmkeep secrets set NAME`, kept sealed in the bucket) and puts its
 * value, in the event's arena, in *value. Without one (none set, one the
 * node cannot open, a name empty or over 128 bytes) it returns false and
 * leaves *value as it was. The host never logs a value: do not log it
 * either (wk_log, stdout and stderr reach the node's log), nor answer or
 * store it.
 */
bool wk_secret(wk_str name, wk_str *value);

/* ---- Actors ---- */

/*
 * wk_actor is the in-memory object of one resident actor on this guest.
 * class_name and name (its URL path is /actor/CLASS/NAME) live as long as
 * the object. data is the class's own, NULL at first, kept
 * from one of the actor's events to the next while the actor stays in
 * memory here: allocate it with malloc, and free it in the leave handler.
 */
typedef struct {
	uint64_t id;
	wk_str class_name, name;
	void *data;
} wk_actor;

/* wk_current is the actor of the running event (NULL outside one). */
wk_actor *wk_current(void);
/* wk_actors is how many actors the guest holds objects of. */
size_t wk_actors(void);

/* A leave handler sees an actor's object before the SDK drops it. It may
 * read it and log; storage, sockets and calls are not the actor's any more
 * (the host fails the call and the guest). */
typedef void (*wk_leave_handler)(wk_actor *a);

/* ---- Registration ---- */

/* The exports' bodies: find or make the actor's object, decode the event,
 * run the handler, hand out the result, free the arena. */
int32_t wk_serve_request(uint64_t actor, wk_request_handler h);
int32_t wk_serve_socket(uint64_t actor, wk_socket_handler h);
int32_t wk_serve_alarm(uint64_t actor, wk_alarm_handler h);
/* wk_set_leave_handler registers the leave handler (WK_HANDLE_LEAVE). */
void wk_set_leave_handler(wk_leave_handler h);

/* WK_HANDLE_REQUEST(fn) exports wasmkeep_on_request, serving requests
 * with fn. Once per module. */
#define WK_HANDLE_REQUEST(fn)                                                                      \
	int32_t wasmkeep_on_request(uint64_t actor);                                               \
	__attribute__((export_name("wasmkeep_on_request"))) int32_t wasmkeep_on_request(uint64_t actor) { \
		return wk_serve_request(actor, fn);                                                \
	}

/* WK_HANDLE_SOCKET(fn) exports wasmkeep_on_socket, serving socket events
 * with fn. Once per module; without it socket events are dropped. */
#define WK_HANDLE_SOCKET(fn)                                                                       \
	int32_t wasmkeep_on_socket(uint64_t actor);                                                \
	__attribute__((export_name("wasmkeep_on_socket"))) int32_t wasmkeep_on_socket(uint64_t actor) { \
		return wk_serve_socket(actor, fn);                                                 \
	}

/* WK_HANDLE_ALARM(fn) exports wasmkeep_on_alarm, serving the actor's due
 * alarms with fn. Once per module; without it a due alarm is given up. */
#define WK_HANDLE_ALARM(fn)                                                                        \
	int32_t wasmkeep_on_alarm(uint64_t actor);                                                 \
	__attribute__((export_name("wasmkeep_on_alarm"))) int32_t wasmkeep_on_alarm(uint64_t actor) { \
		return wk_serve_alarm(actor, fn);                                                  \
	}

/* WK_HANDLE_LEAVE(fn) has fn called with an actor's object when the actor
 * leaves memory, before the SDK drops it (wasmkeep.c exports
 * wasmkeep_on_leave either way). Once per module. */
#define WK_HANDLE_LEAVE(fn)                                                                        \
	static void wk_register_leave_(void) __attribute__((constructor));                         \
	static void wk_register_leave_(void) { wk_set_leave_handler(fn); }

/* WK_ISOLATION(mode) exports wasmkeep_isolation: WK_ISOLATION_CLASS has
 * the class's actors share a few guests per node; without it, or with
 * WK_ISOLATION_ACTOR, each resident actor has one of its own. The node
 * may override it (wasmkeep serve --wasm-isolation). */
#define WK_ISOLATION(mode)                                                                         \
	int32_t wasmkeep_isolation(void);                                                          \
	__attribute__((export_name("wasmkeep_isolation"))) int32_t wasmkeep_isolation(void) { return (mode); }

#endif
