// Package reminders is an example class with alarms: each actor is a list
// of reminders, each fired at its time by the node, whether the actor is
// in memory then or not, on whichever node holds it.
//
//	POST   /actor/reminders/NAME?in=90s&text=stretch   set one (or at=RFC 3339 time);
//	                                                    &hook=URL: POST its text there too
//	                                                    when it fires (a URL the node's
//	                                                    --egress-allow allows)
//	GET    /actor/reminders/NAME                        the fired ones, then those to come
//	DELETE /actor/reminders/NAME?id=r3                  take one back
//
// A reminder's alarm is set by the same event that stores its text, so
// both land or neither does; when it fires, its event moves the text to
// the fired list, and the alarm ends with that event.
package reminders

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
)

// Reminders is the class, registered as "reminders" by the wasmkeep binary.
type Reminders struct{}

// Handle serves one request of a list of reminders.
func (Reminders) Handle(ctx context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
	switch req.Method {
	case http.MethodPost:
		return set(ctx, req, st)
	case http.MethodDelete:
		id := req.Query.Get("id")
		if err := actors.DeleteAlarm(ctx, id); err != nil {
			return actors.Text(http.StatusBadRequest, err.Error()+"\n"), nil
		}
		st.Delete("text/" + id)
	case http.MethodGet:
	default:
		return actors.Text(http.StatusMethodNotAllowed, "reminders: GET, POST or DELETE\n"), nil
	}
	return list(ctx, st)
}

func set(ctx context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
	at := time.Now()
	switch {
	case req.Query.Has("in"):
		d, err := time.ParseDuration(req.Query.Get("in"))
		if err != nil {
			return actors.Text(http.StatusBadRequest, "in: "+err.Error()+"\n"), nil
		}
		at = at.Add(d)
	case req.Query.Has("at"):
		t, err := time.Parse(time.RFC3339, req.Query.Get("at"))
		if err != nil {
			return actors.Text(http.StatusBadRequest, "at: "+err.Error()+"\n"), nil
		}
		at = t
	default:
		return actors.Text(http.StatusBadRequest, "in=DURATION or at=TIME, please\n"), nil
	}
	n := 0
	if v, ok := st.Get("next"); ok {
		n, _ = strconv.Atoi(string(v))
	}
	n++
	id := "r" + strconv.Itoa(n)
	if err := st.Put("next", []byte(strconv.Itoa(n))); err != nil {
		return nil, err
	}
	if err := st.Put("text/"+id, []byte(req.Query.Get("text"))); err != nil {
		return nil, err
	}
	if hook := req.Query.Get("hook"); hook != "" {
		if err := st.Put("hook/"+id, []byte(hook)); err != nil {
			return nil, err
		}
	}
	if err := actors.SetAlarm(ctx, id, at); err != nil {
		return nil, err
	}
	return actors.Text(http.StatusCreated, fmt.Sprintf("%s at %s\n", id, at.UTC().Format(time.RFC3339Nano))), nil
}

func list(ctx context.Context, st actors.Storage) (*actors.Response, error) {
	var b strings.Builder
	fired, err := st.List(actors.ListOptions{Prefix: "fired/"})
	if err != nil {
		return nil, err
	}
	for _, e := range fired {
		fmt.Fprintf(&b, "fired %s %s\n", strings.TrimPrefix(e.Key, "fired/"), e.Value)
	}
	alarms, err := actors.ListAlarms(ctx)
	if err != nil {
		return nil, err
	}
	for _, a := range alarms {
		text, _ := st.Get("text/" + a.Name)
		fmt.Fprintf(&b, "due %s %s %s\n", a.Name, a.At.UTC().Format(time.RFC3339Nano), text)
	}
	return actors.Text(http.StatusOK, b.String()), nil
}

// HandleAlarm fires a reminder: its text moves to the fired list, under
// the reminder's id, with the time it fired and how late; with a hook, the
// text is posted there first, and the hook's answer kept with it. A hook
// that cannot be reached fails the event, and the alarm is delivered again
// later (Alarm.Retry counts); one the node does not allow is noted, not
// retried.
func (Reminders) HandleAlarm(ctx context.Context, a actors.Alarm, st actors.Storage) error {
	text, _ := st.Get("text/" + a.Name)
	now := time.Now()
	note := ""
	if hook, ok := st.Get("hook/" + a.Name); ok {
		resp, err := actors.Fetch(ctx, &actors.FetchRequest{Method: http.MethodPost, URL: string(hook),
			Header: http.Header{"Content-Type": {"text/plain"}}, Body: text})
		switch {
		case errors.Is(err, actors.ErrFetchRefused), errors.Is(err, actors.ErrBadFetch):
			note = " hook refused"
		case err != nil:
			return err
		default:
			note = fmt.Sprintf(" hook %d", resp.Status)
		}
		st.Delete("hook/" + a.Name)
	}
	st.Delete("text/" + a.Name)
	return st.Put("fired/"+a.Name, fmt.Appendf(nil, "%s late=%s%s %s", now.UTC().Format(time.RFC3339Nano), now.Sub(a.At).Round(time.Millisecond), note, text))
}
