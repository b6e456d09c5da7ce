/*
 * room-c is the chat room of examples/room-wasm in C, on the C SDK
 * (wasmhost/sdk/c): the same page, the same protocol and the same bytes on
 * the wire (the protocol is in examples/room-wasm/main.go). Its last 100
 * messages are in storage and who is present in its sockets' attachments,
 * so that it hibernates between messages while its people stay connected.
 * Its rooms share a few guests per node (WK_ISOLATION_CLASS): it keeps
 * nothing in memory between events.
 *
 * The build makes chat_page.inc, the bytes of examples/chat/page/page.html
 * as a C initialiser list (`make examples` does; so does
 * wasmhost/cguest_test.go).
 */
#include "json.h"

#include <stdlib.h>
#include <string.h>

/* The chat protocol's limits, as in examples/chat/page/rules.go. */
enum { HISTORY_LEN = 100, MAX_NAME = 40, MAX_TEXT = 2000 };

static const unsigned char page_html[] = {
#include "chat_page.inc"
};

/* The history: one JSON-encoded message a line, oldest first (an encoded
 * message has no raw newline). */
#define HISTORY_KEY WK_STR("history")

/* is_space is Go's unicode.IsSpace. */
static bool is_space(int32_t r) {
	switch (r) {
	case '\t': case '\n': case '\v': case '\f': case '\r': case ' ': case 0x85: case 0xA0:
	case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
		return true;
	}
	return r >= 0x2000 && r <= 0x200A;
}

/* clean is page.Clean: drop control characters (invalid UTF-8 becomes
 * U+FFFD), trim white space, then cut to at most max bytes of whole runes. */
static wk_str clean(wk_str s, size_t max) {
	wk_buf b = {0};
	for (size_t i = 0, n; i < s.len; i += n) {
		int32_t r = utf8_decode(s.ptr + i, s.len - i, &n);
		if (r < 0x20 || r == 0x7F)
			continue;
		if (r == 0xFFFD)
			utf8_append(&b, r);
		else
			wk_buf_write(&b, s.ptr + i, n);
	}
	/* Now valid UTF-8: runes can be walked both ways. */
	size_t start = 0, end = b.len, n;
	while (start < end && is_space(utf8_decode(b.ptr + start, end - start, &n)))
		start += n;
	while (end > start) {
		size_t last = end - 1;
		while (last > start && ((unsigned char)b.ptr[last] & 0xC0) == 0x80)
			last--;
		if (!is_space(utf8_decode(b.ptr + last, end - last, &n)))
			break;
		end = last;
	}
	size_t cut = start;
	for (size_t i = start; i < end; i = cut) {
		utf8_decode(b.ptr + i, end - i, &n);
		if (i + n - start > max)
			break;
		cut = i + n;
	}
	return (wk_str){b.ptr ? b.ptr + start : "", cut - start};
}

/* is_websocket is Go's strings.EqualFold(v, "websocket"): ASCII case
 * aside, U+017F folds to s and U+212A (the Kelvin sign) to k. */
static bool is_websocket(wk_str v) {
	static const char want[] = "websocket";
	size_t i = 0, n;
	for (const char *w = want; *w != '\0'; w++, i += n) {
		if (i >= v.len)
			return false;
		int32_t r = utf8_decode(v.ptr + i, v.len - i, &n);
		if (r != *w && r != *w - ('a' - 'A') && !(*w == 's' && r == 0x17F) && !(*w == 'k' && r == 0x212A))
			return false;
	}
	return i == v.len;
}

/* serve serves the page, or accepts the page's WebSocket. */
static wk_response *serve(const wk_request *req) {
	wk_str up;
	if (wk_header(req, "Upgrade", &up) && is_websocket(up)) {
		wk_str tag = WK_STR("member");
		return wk_accept(&tag, 1);
	}
	if (!wk_str_eq(req->method, WK_STR("GET")) || req->path.len != 0)
		return wk_text(404, WK_STR("not found\n"));
	wk_response *resp = wk_response_new(200);
	wk_response_header(resp, "Content-Type", WK_STR("text/html; charset=utf-8"));
	resp->body = (wk_str){(const char *)page_html, sizeof page_html};
	return resp;
}

/* to_members sends b to every socket that joined (has a name): sockets of
 * the plain protocol never get chat frames. */
static void to_members(wk_str b) {
	const wk_socket *s;
	size_t n = wk_ws_list(WK_STR(""), &s);
	for (size_t i = 0; i < n; i++)
		if (s[i].attachment.len > 0)
			wk_ws_send(s[i].id, true, b);
}

/* by_bytes orders names as Go compares strings. */
static int by_bytes(const void *a, const void *b) {
	const wk_str *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = n > 0 ? memcmp(x->ptr, y->ptr, n) : 0;
	if (c != 0)
		return c;
	return x->len < y->len ? -1 : x->len > y->len;
}

/* broadcast_presence tells the members who is present: the names in the
 * open sockets' attachments. */
static void broadcast_presence(void) {
	const wk_socket *s;
	size_t n = wk_ws_list(WK_STR(""), &s), count = 0;
	wk_str *names = wk_alloc((n ? n : 1) * sizeof *names);
	for (size_t i = 0; i < n; i++)
		if (s[i].attachment.len > 0)
			names[count++] = s[i].attachment;
	qsort(names, count, sizeof *names, by_bytes);
	wk_buf b = {0};
	wk_buf_write_cstr(&b, "{\"type\":\"presence\"");
	if (count > 0) { /* as package chat, which omits an empty list */
		wk_buf_write_cstr(&b, ",\"names\":[");
		for (size_t i = 0; i < count; i++) {
			if (i > 0)
				wk_buf_write_byte(&b, ',');
			json_quote(&b, names[i]);
		}
		wk_buf_write_byte(&b, ']');
	}
	wk_buf_write_byte(&b, '}');
	to_members(wk_buf_str(&b));
}

static wk_str encode_message(wk_str from, wk_str text, int64_t at) {
	wk_buf b = {0};
	wk_buf_write_cstr(&b, "{\"from\":");
	json_quote(&b, from);
	wk_buf_write_cstr(&b, ",\"text\":");
	json_quote(&b, text);
	wk_buf_write_cstr(&b, ",\"at\":");
	wk_buf_write_int(&b, at);
	wk_buf_write_byte(&b, '}');
	return wk_buf_str(&b);
}

/* append_history returns the stored history with m added, keeping the
 * last HISTORY_LEN messages. */
static wk_str append_history(wk_str m) {
	wk_str h = {"", 0};
	wk_storage_get(HISTORY_KEY, &h);
	wk_buf b = {0};
	wk_buf_write_str(&b, h);
	if (h.len > 0)
		wk_buf_write_byte(&b, '\n');
	wk_buf_write_str(&b, m);
	size_t lines = 1;
	for (size_t i = 0; i < b.len; i++)
		lines += b.ptr[i] == '\n';
	size_t start = 0;
	for (; lines > HISTORY_LEN; lines--)
		start = (size_t)((char *)memchr(b.ptr + start, '\n', b.len - start) - b.ptr) + 1;
	return (wk_str){b.ptr + start, b.len - start};
}

static void join(const wk_socket_event *ev, const json_object *in) {
	wk_str name = clean(json_get(in, "name"), MAX_NAME);
	if (name.len == 0) {
		wk_ws_close(ev->socket, 1008, WK_STR("a name is required"));
		return;
	}
	if (wk_ws_set_attachment(ev->socket, name) != 0)
		return; /* the socket closed meanwhile */
	/* The history's lines are the elements of the array. */
	wk_str h = {"", 0};
	wk_storage_get(HISTORY_KEY, &h);
	wk_buf b = {0};
	wk_buf_write_cstr(&b, "{\"type\":\"history\",\"messages\":[");
	for (size_t i = 0; i < h.len; i++)
		wk_buf_write_byte(&b, h.ptr[i] == '\n' ? ',' : (uint8_t)h.ptr[i]);
	wk_buf_write_cstr(&b, "]}");
	wk_ws_send(ev->socket, true, wk_buf_str(&b));
	broadcast_presence();
}

static int say(const wk_socket_event *ev, const json_object *in) {
	wk_str from;
	if (!wk_ws_attachment(ev->socket, &from)) {
		wk_ws_close(ev->socket, 1008, WK_STR("join first"));
		return 0;
	}
	wk_str text = clean(json_get(in, "text"), MAX_TEXT);
	if (text.len == 0)
		return 0;
	wk_str m = encode_message(from, text, wk_now_ms());
	if (wk_storage_put(HISTORY_KEY, append_history(m)) != WK_STORED)
		return 1;
	wk_buf b = {0};
	wk_buf_write_cstr(&b, "{\"type\":\"said\",\"message\":");
	wk_buf_write_str(&b, m);
	wk_buf_write_byte(&b, '}');
	to_members(wk_buf_str(&b));
	return 0;
}

/* on_socket runs the room. */
static int on_socket(const wk_socket_event *ev) {
	switch (ev->kind) {
	case WK_SOCKET_CLOSE:
	case WK_SOCKET_ERROR:
		/* The socket is gone from the list already: tell who is left. */
		broadcast_presence();
		return 0;
	case WK_SOCKET_MESSAGE:
		break;
	default:
		return 0;
	}
	if (!ev->text || ev->data.len == 0 || ev->data.ptr[0] != '{') {
		/* The peer benchmark's protocol: "all:" to everyone, else an echo. */
		if (ev->text && wk_str_has_prefix(ev->data, WK_STR("all:")))
			wk_ws_broadcast(WK_STR(""), true, ev->data);
		else
			wk_ws_send(ev->socket, ev->text, ev->data);
		return 0;
	}
	json_object in;
	if (!json_decode_object(ev->data, &in)) {
		wk_ws_close(ev->socket, 1003, WK_STR("expected JSON text"));
		return 0;
	}
	wk_str type = json_get(&in, "type");
	if (wk_str_eq(type, WK_STR("join")))
		join(ev, &in);
	else if (wk_str_eq(type, WK_STR("say")))
		return say(ev, &in);
	return 0;
}

WK_ISOLATION(WK_ISOLATION_CLASS)
WK_HANDLE_REQUEST(serve)
WK_HANDLE_SOCKET(on_socket)
