#include "json.h"

#include <string.h>

enum { RUNE_ERROR = 0xFFFD, MAX_DEPTH = 32 };

int32_t utf8_decode(const char *s, size_t n, size_t *size) {
	const unsigned char *p = (const unsigned char *)s;
	unsigned char c = p[0];
	*size = 1;
	if (c < 0x80)
		return c;
	/* The length and the range of the second byte, by the first byte
	 * (shortest forms only, no surrogates, nothing over U+10FFFF). */
	size_t len;
	unsigned char lo = 0x80, hi = 0xBF;
	if (c >= 0xC2 && c <= 0xDF) {
		len = 2;
	} else if (c >= 0xE0 && c <= 0xEF) {
		len = 3;
		if (c == 0xE0)
			lo = 0xA0;
		else if (c == 0xED)
			hi = 0x9F;
	} else if (c >= 0xF0 && c <= 0xF4) {
		len = 4;
		if (c == 0xF0)
			lo = 0x90;
		else if (c == 0xF4)
			hi = 0x8F;
	} else {
		return RUNE_ERROR;
	}
	if (n < len || p[1] < lo || p[1] > hi)
		return RUNE_ERROR;
	for (size_t i = 2; i < len; i++)
		if (p[i] < 0x80 || p[i] > 0xBF)
			return RUNE_ERROR;
	int32_t r = c & (0x7F >> len);
	for (size_t i = 1; i < len; i++)
		r = r << 6 | (p[i] & 0x3F);
	*size = len;
	return r;
}

void utf8_append(wk_buf *b, int32_t r) {
	if (r < 0 || r > 0x10FFFF || (r >= 0xD800 && r < 0xE000))
		r = RUNE_ERROR;
	if (r < 0x80) {
		wk_buf_write_byte(b, (uint8_t)r);
	} else if (r < 0x800) {
		wk_buf_write_byte(b, (uint8_t)(0xC0 | r >> 6));
		wk_buf_write_byte(b, (uint8_t)(0x80 | (r & 0x3F)));
	} else if (r < 0x10000) {
		wk_buf_write_byte(b, (uint8_t)(0xE0 | r >> 12));
		wk_buf_write_byte(b, (uint8_t)(0x80 | (r >> 6 & 0x3F)));
		wk_buf_write_byte(b, (uint8_t)(0x80 | (r & 0x3F)));
	} else {
		wk_buf_write_byte(b, (uint8_t)(0xF0 | r >> 18));
		wk_buf_write_byte(b, (uint8_t)(0x80 | (r >> 12 & 0x3F)));
		wk_buf_write_byte(b, (uint8_t)(0x80 | (r >> 6 & 0x3F)));
		wk_buf_write_byte(b, (uint8_t)(0x80 | (r & 0x3F)));
	}
}

void json_quote(wk_buf *b, wk_str s) {
	static const char hex[] = "0123456789abcdef";
	wk_buf_write_byte(b, '"');
	for (size_t i = 0; i < s.len;) {
		unsigned char c = (unsigned char)s.ptr[i];
		if (c < 0x80) {
			if (c == '"' || c == '\\') {
				wk_buf_write_byte(b, '\\');
				wk_buf_write_byte(b, c);
			} else if (c < 0x20) {
				char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 0xF]};
				wk_buf_write(b, esc, sizeof esc);
			} else {
				wk_buf_write_byte(b, c);
			}
			i++;
			continue;
		}
		size_t n;
		utf8_append(b, utf8_decode(s.ptr + i, s.len - i, &n));
		i += n;
	}
	wk_buf_write_byte(b, '"');
}

/* decoder reads JSON front to back; i may pass the end by one after a
 * backslash at the end, which every read then sees as the end. */
typedef struct {
	const char *b;
	size_t len, i;
} decoder;

static char peek(const decoder *d) { return d->i < d->len ? d->b[d->i] : 0; }

static bool eat(decoder *d, char c) {
	if (d->i < d->len && d->b[d->i] == c) {
		d->i++;
		return true;
	}
	return false;
}

static void space(decoder *d) {
	while (d->i < d->len && (d->b[d->i] == ' ' || d->b[d->i] == '\t' || d->b[d->i] == '\n' || d->b[d->i] == '\r'))
		d->i++;
}

/* end reports whether only white space is left. */
static bool end(decoder *d) {
	space(d);
	return d->i == d->len;
}

static bool hex4(decoder *d, int32_t *r) {
	if (d->i + 4 > d->len)
		return false;
	int32_t v = 0;
	for (size_t k = 0; k < 4; k++) {
		char c = d->b[d->i + k];
		if (c >= '0' && c <= '9')
			v = v << 4 | (c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v << 4 | (c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v = v << 4 | (c - 'A' + 10);
		else
			return false;
	}
	d->i += 4;
	*r = v;
	return true;
}

static bool is_surrogate(int32_t r) { return r >= 0xD800 && r < 0xE000; }

/* str reads a string. A \u escape of a surrogate takes the next \u escape
 * as its pair, which makes U+FFFD unless the two are a high and a low
 * surrogate (Go's utf16.DecodeRune). */
static bool str(decoder *d, wk_str *out) {
	if (!eat(d, '"'))
		return false;
	wk_buf b = {0};
	while (d->i < d->len) {
		char c = d->b[d->i];
		if (c == '"') {
			d->i++;
			*out = wk_buf_str(&b);
			if (out->ptr == NULL)
				*out = (wk_str){"", 0};
			return true;
		}
		if ((unsigned char)c < 0x20)
			return false;
		if (c != '\\') {
			wk_buf_write_byte(&b, (uint8_t)c);
			d->i++;
			continue;
		}
		d->i++;
		char e = peek(d);
		d->i++;
		switch (e) {
		case '"':
		case '\\':
		case '/':
			wk_buf_write_byte(&b, (uint8_t)e);
			break;
		case 'b':
			wk_buf_write_byte(&b, '\b');
			break;
		case 'f':
			wk_buf_write_byte(&b, '\f');
			break;
		case 'n':
			wk_buf_write_byte(&b, '\n');
			break;
		case 'r':
			wk_buf_write_byte(&b, '\r');
			break;
		case 't':
			wk_buf_write_byte(&b, '\t');
			break;
		case 'u': {
			int32_t r;
			if (!hex4(d, &r))
				return false;
			if (is_surrogate(r)) {
				int32_t r2 = RUNE_ERROR;
				if (peek(d) == '\\' && d->i + 1 < d->len && d->b[d->i + 1] == 'u') {
					d->i += 2;
					if (!hex4(d, &r2))
						return false;
				}
				if (r < 0xDC00 && r2 >= 0xDC00 && r2 < 0xE000)
					r = ((r - 0xD800) << 10 | (r2 - 0xDC00)) + 0x10000;
				else
					r = RUNE_ERROR;
			}
			utf8_append(&b, r);
			break;
		}
		default:
			return false;
		}
	}
	return false;
}

static bool word(decoder *d, const char *w) {
	size_t n = strlen(w);
	if (d->i + n > d->len || memcmp(d->b + d->i, w, n) != 0)
		return false;
	d->i += n;
	return true;
}

static bool is_number_byte(char c) { return c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' || (c >= '0' && c <= '9'); }

/* skip checks and skips one value of any type (numbers loosely). */
static bool skip(decoder *d, int depth) {
	if (depth > MAX_DEPTH)
		return false;
	char c = peek(d);
	wk_str ignored;
	switch (c) {
	case '"':
		return str(d, &ignored);
	case '{':
	case '[': {
		d->i++;
		char closer = c == '{' ? '}' : ']';
		space(d);
		if (eat(d, closer))
			return true;
		for (;;) {
			space(d);
			if (c == '{') {
				if (!str(d, &ignored))
					return false;
				space(d);
				if (!eat(d, ':'))
					return false;
				space(d);
			}
			if (!skip(d, depth + 1))
				return false;
			space(d);
			if (eat(d, closer))
				return true;
			if (!eat(d, ','))
				return false;
		}
	}
	case 't':
		return word(d, "true");
	case 'f':
		return word(d, "false");
	case 'n':
		return word(d, "null");
	}
	if (c == '-' || (c >= '0' && c <= '9')) {
		size_t start = d->i;
		while (d->i < d->len && is_number_byte(d->b[d->i]))
			d->i++;
		return d->i > start;
	}
	return false;
}

static void add(json_object *o, wk_str key, wk_str value) {
	if (o->n == o->cap) {
		size_t cap = o->cap ? o->cap * 2 : 4;
		json_member *m = wk_alloc(cap * sizeof *m);
		if (o->n > 0)
			memcpy(m, o->members, o->n * sizeof *m);
		o->members = m;
		o->cap = cap;
	}
	o->members[o->n++] = (json_member){key, value};
}

bool json_decode_object(wk_str data, json_object *out) {
	decoder d = {data.ptr, data.len, 0};
	*out = (json_object){0};
	space(&d);
	if (!eat(&d, '{'))
		return false;
	space(&d);
	if (eat(&d, '}'))
		return end(&d);
	for (;;) {
		wk_str key, value;
		space(&d);
		if (!str(&d, &key))
			return false;
		space(&d);
		if (!eat(&d, ':'))
			return false;
		space(&d);
		if (peek(&d) == '"') {
			if (!str(&d, &value))
				return false;
			add(out, key, value);
		} else if (!skip(&d, 0)) {
			return false;
		}
		space(&d);
		if (eat(&d, '}'))
			return end(&d);
		if (!eat(&d, ','))
			return false;
	}
}

wk_str json_get(const json_object *o, const char *key) {
	wk_str k = wk_cstr(key);
	for (size_t i = o->n; i > 0; i--)
		if (wk_str_eq(o->members[i - 1].key, k))
			return o->members[i - 1].value;
	return (wk_str){"", 0};
}
