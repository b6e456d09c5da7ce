package actors

import (
	"context"
	"fmt"
	"net/http"
	"strings"
)

// KV is the built-in key-value class, registered as "kv": each actor is a
// store of its own, for users and benchmarks to drive over HTTP. Under
// /actor/kv/<name>:
//
//	PUT    /<key>  stores the body under key: 201 when key is new, 204 when
//	               it replaced a value
//	GET    /<key>  the value (application/octet-stream); 404 when absent
//	DELETE /<key>  removes key: 204, or 404 when absent
//	GET    /       the keys in byte order, one a line (text/plain);
//	               ?prefix=P only those that start with P
//	DELETE /       removes every key: 204
//
// The root is also reached without its slash. A key is the rest of the
// path, unescaped: it may hold slashes (/a/b is the key "a/b"), not a
// newline (400), which would break the listing. A PUT past the storage
// limits (MaxKeyLen, MaxValueLen, the actor's state bound) gets 413 with
// the limit's message. ?dry-run on a PUT or DELETE answers as the request
// would and writes nothing: the event runs, then rolls back. Any other
// method gets 405 with Allow.
type KV struct{}

// Handle serves one event of a kv store.
func (KV) Handle(ctx context.Context, req *Request, st Storage) (*Response, error) {
	key := strings.TrimPrefix(req.Path, "/")
	if key == "" {
		return kvRoot(req, st)
	}
	if strings.Contains(key, "\n") {
		return Text(http.StatusBadRequest, "kv: a key may not hold a newline\n"), nil
	}
	var resp *Response
	switch req.Method {
	case http.MethodGet:
		v, ok := st.Get(key)
		if !ok {
			return kvNotFound(ctx, key), nil
		}
		h := http.Header{}
		h.Set("Content-Type", "application/octet-stream")
		return &Response{Status: http.StatusOK, Header: h, Body: v}, nil
	case http.MethodPut:
		_, had := st.Get(key)
		if err := st.Put(key, req.Body); err != nil {
			return nil, err // past a limit: 413 with its message
		}
		resp = &Response{Status: http.StatusNoContent}
		if !had {
			resp.Status = http.StatusCreated
		}
	case http.MethodDelete:
		if _, ok := st.Get(key); !ok {
			return kvNotFound(ctx, key), nil
		}
		st.Delete(key)
		resp = &Response{Status: http.StatusNoContent}
	default:
		return kvNotAllowed("GET, PUT, DELETE"), nil
	}
	return kvWritten(req, resp)
}

// kvRoot serves the store itself: the list of keys, or deleting them all.
func kvRoot(req *Request, st Storage) (*Response, error) {
	switch req.Method {
	case http.MethodGet:
		entries, err := st.List(ListOptions{Prefix: req.Query.Get("prefix")})
		if err != nil {
			return nil, err
		}
		var b strings.Builder
		for _, e := range entries {
			b.WriteString(e.Key)
			b.WriteByte('\n')
		}
		return Text(http.StatusOK, b.String()), nil
	case http.MethodDelete:
		if err := DeleteAll(st); err != nil {
			return nil, err
		}
		return kvWritten(req, &Response{Status: http.StatusNoContent})
	}
	return kvNotAllowed("GET, DELETE"), nil
}

// kvWritten answers a request that wrote: with ?dry-run its writes are
// rolled back, and the client gets the answer all the same.
func kvWritten(req *Request, resp *Response) (*Response, error) {
	if req.Query.Has("dry-run") {
		return nil, Rollback(resp)
	}
	return resp, nil
}

func kvNotFound(ctx context.Context, key string) *Response {
	return Text(http.StatusNotFound, fmt.Sprintf("kv: %s holds no key %q\n", ActorOf(ctx).Name, key))
}

func kvNotAllowed(allow string) *Response {
	r := Text(http.StatusMethodNotAllowed, "kv: only "+allow+" here\n")
	r.Header.Set("Allow", allow)
	return r
}
