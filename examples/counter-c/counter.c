/*
 * counter-c is examples/counter-wasm in C, on the C SDK (wasmhost/sdk/c):
 * a counter kept in the actor's storage. GET increments it and returns the
 * new value as text; GET with ?read returns it without writing; other
 * methods get 405. `make examples` builds it into classes/counter-c.wasm.
 * Its counters share a few guests per node (WK_ISOLATION_CLASS).
 */
#include "wasmkeep.h"

/* parse_int reads a decimal int64 with an optional sign, as Go's
 * strconv.Atoi does on a 64-bit int. */
static bool parse_int(wk_str s, int64_t *out) {
	size_t i = 0;
	bool neg = false;
	if (s.len > 0 && (s.ptr[0] == '+' || s.ptr[0] == '-')) {
		neg = s.ptr[0] == '-';
		i++;
	}
	if (i == s.len)
		return false;
	uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, n = 0;
	for (; i < s.len; i++) {
		if (s.ptr[i] < '0' || s.ptr[i] > '9')
			return false;
		unsigned d = (unsigned)(s.ptr[i] - '0');
		if (n > (limit - d) / 10)
			return false;
		n = n * 10 + d;
	}
	*out = neg ? (int64_t)(0 - n) : (int64_t)n;
	return true;
}

static wk_response *serve(const wk_request *req) {
	if (!wk_str_eq(req->method, WK_STR("GET"))) {
		wk_response *resp = wk_text(405, WK_STR("counter: only GET\n"));
		wk_response_header(resp, "Allow", WK_STR("GET"));
		return resp;
	}
	int64_t n = 0;
	wk_str v;
	if (wk_storage_get(WK_STR("count"), &v) && !parse_int(v, &n))
		return wk_text(500, WK_STR("counter: stored count is not a number\n"));
	if (!wk_query(req, "read", &v)) {
		n = (int64_t)((uint64_t)n + 1); /* wraps, as Go's int does */
		wk_buf b = {0};
		wk_buf_write_int(&b, n);
		if (wk_storage_put(WK_STR("count"), wk_buf_str(&b)) != WK_STORED)
			return wk_text(500, WK_STR("counter: guest: storage limit\n"));
	}
	wk_buf out = {0};
	wk_buf_write_int(&out, n);
	wk_buf_write_byte(&out, '\n');
	return wk_text(200, wk_buf_str(&out));
}

WK_ISOLATION(WK_ISOLATION_CLASS)
WK_HANDLE_REQUEST(serve)
