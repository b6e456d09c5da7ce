package actors

import (
	"context"
	"net/http"
	"strconv"
)

// Counter is the Go-native example class, registered as "counter". GET
// increments the counter kept under the key "count" and returns the new
// value as text; GET with ?read returns it without writing. Any other
// method gets 405.
//
// A class for your own binary is written the same way: implement Class,
// keep everything durable in Storage, and Register it before the node
// serves.
type Counter struct{}

// Handle serves one event of a counter.
func (Counter) Handle(_ context.Context, req *Request, st Storage) (*Response, error) {
	if req.Method != http.MethodGet {
		r := Text(http.StatusMethodNotAllowed, "counter: only GET\n")
		r.Header.Set("Allow", http.MethodGet)
		return r, nil
	}
	n := 0
	if v, ok := st.Get("count"); ok {
		var err error
		if n, err = strconv.Atoi(string(v)); err != nil {
			return nil, err
		}
	}
	if !req.Query.Has("read") {
		n++
		if err := st.Put("count", []byte(strconv.Itoa(n))); err != nil {
			return nil, err
		}
	}
	return Text(http.StatusOK, strconv.Itoa(n)+"\n"), nil
}
