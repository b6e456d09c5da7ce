// Command probe is a test guest for wasmhost: each path exercises one of
// the host's limits or guarantees.
package main

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/wasmkeep/wasmkeep/wasmhost/guest"
)

// events counts the events this guest served, so that tests can tell a
// kept guest from a fresh one.
var events int

var sink []byte

func init() {
	guest.Handle(serve)
	guest.HandleAlarm(alarm)
}

// failAlarms is how many alarm events still fail (a failed event's writes
// are discarded; the guest's memory is kept).
var failAlarms int

// alarm counts the alarm's firings under "fired/<name>", with its retry.
func alarm(a guest.Alarm) error {
	if failAlarms > 0 {
		failAlarms--
		return errAlarm
	}
	n := 0
	if v, ok := guest.Storage.Get("fired/" + a.Name); ok {
		n, _ = strconv.Atoi(strings.Fields(string(v))[0])
	}
	guest.Storage.Put("fired/"+a.Name, []byte(strconv.Itoa(n+1)+" retry="+strconv.Itoa(a.Retry)))
	return nil
}

var errAlarm = errors.New("probe: failing on purpose")

func serve(r *guest.Request) *guest.Response {
	events++
	switch r.Path {
	case "/events":
	case "/loop":
		for {
			events++
		}
	case "/recover":
		func() {
			defer func() { _ = recover() }()
			panic("recovered")
		}()
	case "/panic":
		panic("not recovered")
	case "/print":
		println("hello on stderr")
		return guest.Text(200, "printed")
	case "/grow":
		// Allocate 1 MiB at a time until the host's memory limit stops us.
		for {
			sink = append(sink, make([]byte, 1<<20)...)
		}
	case "/spin":
		n, _ := r.Query("n")
		iters, _ := strconv.Atoi(n)
		x := uint64(1)
		for i := 0; i < iters; i++ {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
		return guest.Text(200, strconv.FormatUint(x, 10))
	case "/echo":
		resp := &guest.Response{Status: 201, Body: r.Body}
		resp.Header = append(resp.Header, guest.Field{Name: "X-Method", Value: r.Method})
		resp.Header = append(resp.Header, guest.Field{Name: "X-Query", Value: r.RawQuery})
		resp.Header = append(resp.Header, guest.Field{Name: "X-Token", Value: r.HeaderValue("x-token")})
		return resp
	case "/limit":
		if err := guest.Storage.Put("", []byte("x")); err != guest.ErrLimit {
			return guest.Text(500, "empty key accepted")
		}
		return guest.Text(200, "refused")
	case "/list":
		return list(r)
	case "/batch":
		return batch(r)
	case "/raw-batch":
		return guest.Text(200, strconv.Itoa(int(rawBatch(r.Body))))
	case "/get-many":
		return getMany(r)
	case "/put-many":
		return putMany(r)
	case "/delete-all":
		return deleteAll(r)
	case "/rollback":
		return rollback(r)
	case "/raw-get-many":
		return guest.Text(200, strconv.Itoa(int(rawGetManyLen(r.Body))))
	case "/sql":
		return sqlScript(r)
	case "/raw-sql":
		return &guest.Response{Body: rawSQLExec(r.Body)}
	case "/raw-list":
		return guest.Text(200, strconv.Itoa(int(rawListLen(r.Body))))
	case "/rand":
		// math/rand/v2 draws from the Go runtime's generator, seeded at
		// the guest's start.
		return guest.Text(200, strconv.FormatUint(rand.Uint64(), 10))
	case "/nil":
		return nil
	case "/ws":
		// Accept with the tags of the query, comma-separated.
		tags, _ := r.Query("tags")
		var list []string
		if tags != "" {
			list = strings.Split(tags, ",")
		}
		resp := guest.Accept(list...)
		if resp.Status == 101 {
			guest.Storage.Put("accepted", []byte(tags))
		}
		return resp
	case "/ws-raw":
		// ws_accept with the body as the tag encoding.
		return guest.Text(200, strconv.Itoa(int(rawAccept(r.Body))))
	case "/ws-oob":
		rawSendOutOfRange(1)
	case "/ws-send":
		// Sends from a request event.
		guest.Sockets.Send(7, true, []byte("from request"))
	case "/log":
		guest.Log(guest.LevelInfo, "hello from the guest")
	case "/call":
		return call(r)
	case "/fetch":
		return fetch(r)
	case "/dial":
		return dial(r)
	case "/dial-raw":
		// ws_dial with the body as the request encoding.
		return guest.Text(200, strconv.FormatInt(rawDial(r.Body), 10))
	case "/alarm":
		return alarms(r)
	case "/secret":
		return secret(r)
	}
	return guest.Text(200, strconv.Itoa(events))
}

// call stores "before-call", calls the actor the query names (class,
// name) with the query's path and q, the request's body and its X-Token
// header, and answers the callee's status, X-Echo header and body, or the
// error.
func call(r *guest.Request) *guest.Response {
	guest.Storage.Put("before-call", []byte("yes"))
	class, _ := r.Query("class")
	name, _ := r.Query("name")
	path, _ := r.Query("path")
	q, _ := r.Query("q")
	req := &guest.Request{Method: "POST", Path: path, RawQuery: q, Body: r.Body,
		Header: []guest.Field{{Name: "X-Token", Value: r.HeaderValue("X-Token")}}}
	resp, err := guest.Call(class, name, req)
	if err != nil {
		return guest.Text(200, "error: "+err.Error())
	}
	echo := ""
	for _, f := range resp.Header {
		if f.Name == "X-Echo" {
			echo = f.Value
		}
	}
	return guest.Text(200, strconv.Itoa(resp.Status)+" "+echo+" "+string(resp.Body))
}

// alarms sets (?set=NAME&at=UNIX_MS), deletes (?delete=NAME) or makes the
// next alarm events fail (?fail=N), then answers the fired counts and the
// alarms set, with GetAlarm's answer for ?get=NAME.
func alarms(r *guest.Request) *guest.Response {
	var b strings.Builder
	if name, ok := r.Query("set"); ok {
		at, _ := r.Query("at")
		ms, _ := strconv.ParseInt(at, 10, 64)
		if err := guest.SetAlarm(name, time.UnixMilli(ms)); err != nil {
			b.WriteString("set: " + err.Error() + "\n")
		}
	}
	if name, ok := r.Query("delete"); ok {
		if err := guest.DeleteAlarm(name); err != nil {
			b.WriteString("delete: " + err.Error() + "\n")
		}
	}
	if n, ok := r.Query("fail"); ok {
		failAlarms, _ = strconv.Atoi(n)
	}
	if name, ok := r.Query("get"); ok {
		at, ok := guest.GetAlarm(name)
		b.WriteString("get " + name + " " + strconv.FormatBool(ok) + " " + strconv.FormatInt(at.UnixMilli(), 10) + "\n")
	}
	fired, _ := guest.Storage.List(guest.ListOptions{Prefix: "fired/"})
	for _, e := range fired {
		b.WriteString(e.Key + " " + string(e.Value) + "\n")
	}
	for _, a := range guest.ListAlarms() {
		b.WriteString("alarm " + a.Name + " " + strconv.FormatInt(a.At.UnixMilli(), 10) + " " + strconv.Itoa(a.Retry) + "\n")
	}
	return guest.Text(200, b.String())
}

// fetch stores "before-fetch", sends the request's body to the URL of the
// query's url with its X-Token header, and answers the status, X-Echo
// header and body that came back, or the error.
func fetch(r *guest.Request) *guest.Response {
	guest.Storage.Put("before-fetch", []byte("yes"))
	url, _ := r.Query("url")
	method, _ := r.Query("method")
	resp, err := guest.Fetch(&guest.FetchRequest{Method: method, URL: url, Body: r.Body,
		Header: []guest.Field{{Name: "X-Token", Value: r.HeaderValue("X-Token")}}})
	if err != nil {
		return guest.Text(200, "error: "+err.Error())
	}
	echo := ""
	for _, f := range resp.Header {
		if f.Name == "X-Echo" {
			echo = f.Value
		}
	}
	return guest.Text(200, strconv.Itoa(resp.Status)+" "+echo+" "+string(resp.Body))
}

// secret reads the secrets the lines of the body name, logging each name
// it reads, and answers "NAME=VALUE" for each it has, "NAME -" for each
// it has not.
func secret(r *guest.Request) *guest.Response {
	var b strings.Builder
	for _, name := range strings.Split(string(r.Body), "\n") {
		guest.Log(guest.LevelInfo, "reading secret "+name)
		if v, ok := guest.Secret(name); ok {
			b.WriteString(name + "=" + string(v) + "\n")
		} else {
			b.WriteString(name + " -\n")
		}
	}
	return guest.Text(200, b.String())
}

// dial stores "before-dial", then dials the query's url (n times, for
// ?n=N) with its X-Token header and the query's comma-separated tags
// (after rolling the event back, for ?rollback), and answers the last
// socket's id and whether it is dialed, or the error.
func dial(r *guest.Request) *guest.Response {
	guest.Storage.Put("before-dial", []byte("yes"))
	url, _ := r.Query("url")
	var tags []string
	if t, _ := r.Query("tags"); t != "" {
		tags = strings.Split(t, ",")
	}
	n := 1
	if v, ok := r.Query("n"); ok {
		n, _ = strconv.Atoi(v)
	}
	_, rollback := r.Query("rollback")
	if rollback {
		guest.Rollback(nil)
	}
	answer := ""
	for range n {
		id, err := guest.DialSocket(url, []guest.Field{{Name: "X-Token", Value: r.HeaderValue("X-Token")}}, tags...)
		if err != nil {
			answer = "error: " + err.Error()
			break
		}
		answer = "socket " + strconv.FormatUint(uint64(id), 10) + " dialed=" + strconv.FormatBool(id.Dialed())
	}
	if rollback {
		return guest.Rollback(guest.Text(200, answer))
	}
	return guest.Text(200, answer)
}

// list answers the entries that the query's prefix, start, end, limit and
// reverse select, as "key=value" lines, or 400 for invalid options.
func list(r *guest.Request) *guest.Response {
	var opt guest.ListOptions
	opt.Prefix, _ = r.Query("prefix")
	opt.Start, _ = r.Query("start")
	opt.End, _ = r.Query("end")
	_, opt.Reverse = r.Query("reverse")
	if l, ok := r.Query("limit"); ok {
		opt.Limit, _ = strconv.Atoi(l)
	}
	entries, err := guest.Storage.List(opt)
	if err != nil {
		return guest.Text(400, err.Error())
	}
	var b []byte
	for _, e := range entries {
		b = append(b, e.Key...)
		b = append(b, '=')
		b = append(b, e.Value...)
		b = append(b, '\n')
	}
	return guest.Text(200, string(b))
}

// batch puts "before" under the query's put key, if any, then applies the
// body's ops as one batch, a line each: "put <key> <value>" or
// "del <key>". It answers "ok" or "refused", then the listing of the whole
// storage as the event sees it.
func batch(r *guest.Request) *guest.Response {
	if key, ok := r.Query("put"); ok {
		if err := guest.Storage.Put(key, []byte("before")); err != nil {
			return guest.Text(500, err.Error())
		}
	}
	var ops []guest.Op
	rest := string(r.Body)
	for rest != "" {
		var line string
		line, rest = cut(rest, '\n')
		verb, args := cut(line, ' ')
		switch verb {
		case "put":
			key, value := cut(args, ' ')
			ops = append(ops, guest.Op{Key: key, Value: []byte(value)})
		case "del":
			ops = append(ops, guest.Op{Key: args, Delete: true})
		default:
			return guest.Text(400, "bad op "+line)
		}
	}
	result := "ok\n"
	if err := guest.Storage.Batch(ops...); err == guest.ErrLimit {
		result = "refused\n"
	} else if err != nil {
		return guest.Text(500, err.Error())
	}
	resp := list(&guest.Request{})
	resp.Body = append([]byte(result), resp.Body...)
	return resp
}

// getMany puts "written" under the query's put key, if any, then reads
// the comma-separated keys of the query's keys (or k0 to k<n-1> for the
// query's n) in one GetMany, and answers "key=value" or "key absent" for
// each, in order (for n: how many were found).
func getMany(r *guest.Request) *guest.Response {
	if key, ok := r.Query("put"); ok {
		guest.Storage.Put(key, []byte("written"))
	}
	var keys []string
	if s, ok := r.Query("keys"); ok {
		keys = strings.Split(s, ",")
	}
	if s, ok := r.Query("n"); ok {
		n, _ := strconv.Atoi(s)
		for i := range n {
			keys = append(keys, "k"+strconv.Itoa(i))
		}
	}
	vals := guest.Storage.GetMany(keys...)
	if _, ok := r.Query("n"); ok {
		return guest.Text(200, strconv.Itoa(len(vals))+" found")
	}
	var b []byte
	for _, k := range keys {
		if v, ok := vals[k]; ok {
			b = append(b, k+"="+string(v)+"\n"...)
		} else {
			b = append(b, k+" absent\n"...)
		}
	}
	return guest.Text(200, string(b))
}

// putMany puts the body's lines, "key value" each, in one PutMany (or k0
// to k<n-1> for the query's n, each valued its key), and answers "ok" or
// "refused".
func putMany(r *guest.Request) *guest.Response {
	var entries []guest.Entry
	rest := string(r.Body)
	for rest != "" {
		var line string
		line, rest = cut(rest, '\n')
		k, v := cut(line, ' ')
		entries = append(entries, guest.Entry{Key: k, Value: []byte(v)})
	}
	if s, ok := r.Query("n"); ok {
		n, _ := strconv.Atoi(s)
		for i := range n {
			k := "k" + strconv.Itoa(i)
			entries = append(entries, guest.Entry{Key: k, Value: []byte(k)})
		}
	}
	if err := guest.Storage.PutMany(entries...); err == guest.ErrLimit {
		return guest.Text(200, "refused")
	} else if err != nil {
		return guest.Text(500, err.Error())
	}
	return guest.Text(200, "ok")
}

// deleteAll puts "before" under the query's put key, if any, deletes
// every key, then puts "after" under the query's after key, if any, and
// answers the listing of the storage as the event sees it.
func deleteAll(r *guest.Request) *guest.Response {
	if key, ok := r.Query("put"); ok {
		guest.Storage.Put(key, []byte("before"))
	}
	if err := guest.Storage.DeleteAll(); err != nil {
		return guest.Text(500, err.Error())
	}
	if key, ok := r.Query("after"); ok {
		guest.Storage.Put(key, []byte("after"))
	}
	return list(&guest.Request{})
}

// rollback writes, and sends to every socket of the actor, what the query
// asks (put=KEY puts "rolled back" under KEY, delete-all deletes every
// key, bcast broadcasts "rolled back broadcast"), then rolls the event
// back, answering status (409 unless given) with header X-Rollback and
// body "rolled back". With call, it then calls the actor probe/other and
// adds the outcome to the body.
func rollback(r *guest.Request) *guest.Response {
	if key, ok := r.Query("put"); ok {
		guest.Storage.Put(key, []byte("rolled back"))
	}
	if _, ok := r.Query("delete-all"); ok {
		guest.Storage.DeleteAll()
	}
	if _, ok := r.Query("bcast"); ok {
		guest.Sockets.Broadcast("", true, []byte("rolled back broadcast"))
	}
	status := 409
	if s, ok := r.Query("status"); ok {
		status, _ = strconv.Atoi(s)
	}
	resp := guest.Rollback(&guest.Response{Status: status, Header: []guest.Field{{Name: "X-Rollback", Value: "yes"}},
		Body: []byte("rolled back")})
	if _, ok := r.Query("call"); ok {
		_, err := guest.Call("probe", "other", &guest.Request{Method: "GET"})
		resp.Body = append(resp.Body, "\ncall: "+errString(err)...)
	}
	return resp
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

func cut(s string, sep byte) (before, after string) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

func main() {}
