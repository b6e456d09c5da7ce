package ingress

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"

	"github.com/wasmkeep/wasmkeep/actors"
)

// The front (actors.Front): every request outside /actor/ and the node's
// own paths goes to it, on this node, with a context from which it calls
// actors wherever they live. Its RouteTo hands the request, as it came,
// to the /actor/ path of the actor it names, which then goes the way of
// any request for that actor (forwarded, or an upgrade relayed, to the
// node that holds it).

// frontContexts is what the node's host offers a front's requests
// (actorhost.Host.FrontContext).
type frontContexts interface {
	FrontContext(ctx context.Context) context.Context
}

// frontMethods are the methods a front may be asked.
var frontMethods = map[string]bool{http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true}

// frontBox holds the front a node serves now.
type frontBox struct{ f actors.Front }

// SetFront makes f the front from the next request on (a deployed front
// replaces the one before; nil: none, the paths outside /actor/ are 404).
func (h *Handler) SetFront(f actors.Front) {
	if f == nil {
		h.front.Store(nil)
		return
	}
	h.front.Store(&frontBox{f})
}

// serveFront serves r with the front, if there is one.
func (h *Handler) serveFront(w http.ResponseWriter, r *http.Request) {
	fb := h.front.Load()
	if fb == nil {
		http.NotFound(w, r)
		return
	}
	if !frontMethods[r.Method] {
		if r.ContentLength != 0 {
			refuseBody(w)
		}
		text(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	body, reserved, err := h.bodies.read(w, r, h.cfg.MaxBody)
	if err != nil {
		h.bodies.release(reserved)
		var be *bodyError
		if !errors.As(err, &be) {
			be = &bodyError{http.StatusBadRequest, err.Error()}
		}
		w.Header().Set("Connection", "close")
		text(w, be.status, be.msg)
		return
	}
	ctx := r.Context()
	if fc, ok := h.cfg.Host.(frontContexts); ok {
		ctx = fc.FrontContext(ctx)
	}
	req := &actors.Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Header: r.Header.Clone(), Body: body}
	resp, err := fb.f.ServeFront(ctx, req)
	h.bodies.release(reserved) // the route below reads (and holds) it again
	switch {
	case r.Context().Err() != nil:
		return
	case err != nil:
		h.log.Error("front failed", slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Any("err", err))
		text(w, http.StatusInternalServerError, "internal error")
		return
	case resp == nil:
		h.log.Error("front answered nothing", slog.String("method", r.Method), slog.String("path", r.URL.Path))
		text(w, http.StatusInternalServerError, "internal error")
		return
	case resp.Accept != nil:
		h.log.Error("front accepted a WebSocket: only an actor can (hand it over with actors.RouteTo)", slog.String("path", r.URL.Path))
		text(w, http.StatusInternalServerError, "internal error")
		return
	case resp.Route != nil:
		if err := actors.CheckRoute(resp.Route); err != nil {
			h.log.Error("front routed nowhere", slog.String("path", r.URL.Path), slog.Any("err", err))
			text(w, http.StatusInternalServerError, "internal error")
			return
		}
		rt := resp.Route
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/actor/" + rt.Actor.Class + "/" + rt.Actor.Name + rt.Path
		r2.URL.RawPath = "/actor/" + url.PathEscape(rt.Actor.Class) + "/" + url.PathEscape(rt.Actor.Name) + escapePath(rt.Path)
		r2.Body, r2.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		h.serveActor(w, r2)
		return
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.Status)
	if r.Method != http.MethodHead {
		w.Write(resp.Body)
	}
}

// escapePath escapes a route's path, slashes kept.
func escapePath(p string) string { return (&url.URL{Path: p}).EscapedPath() }
