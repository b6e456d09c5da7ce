/*
 * The few JSON shapes of the room, as examples/room-wasm/json.go reads and
 * writes them: a flat object read into its string members, and strings
 * written. UTF-8 is decoded as Go decodes it, so that both rooms answer
 * the same bytes to the same input.
 */
#ifndef ROOM_JSON_H
#define ROOM_JSON_H

#include "wasmkeep.h"

/* utf8_decode decodes the rune at the start of p (n bytes) and sets *size
 * to its length: U+FFFD and 1 for an invalid or short encoding, as Go's
 * utf8.DecodeRune. n must be at least 1. */
int32_t utf8_decode(const char *p, size_t n, size_t *size);
void utf8_append(wk_buf *b, int32_t r);

typedef struct {
	wk_str key, value;
} json_member;

/* json_object holds the string members of an object, in their order. */
typedef struct {
	json_member *members;
	size_t n, cap;
} json_object;

/* json_decode_object decodes one well-formed object and keeps its members
 * whose values are strings; it returns false for anything else. */
bool json_decode_object(wk_str data, json_object *out);
/* json_get returns the last string member named key, or "". */
wk_str json_get(const json_object *o, const char *key);
/* json_quote writes s as a JSON string; invalid UTF-8 becomes U+FFFD. */
void json_quote(wk_buf *b, wk_str s);

#endif
