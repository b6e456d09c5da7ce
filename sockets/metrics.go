package sockets

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/wasmkeep/wasmkeep/internal/metricreg"
)

// metrics are the Owner's Prometheus series.
type metrics struct {
	open          prometheus.Gauge
	queued        prometheus.Gauge // bytes held until written (queued.go)
	accepted      prometheus.Counter
	dials         *prometheus.CounterVec // result: opened, failed, invalid, max_sockets, shut_down
	refused       *prometheus.CounterVec // reason: max_sockets, shut_down, handshake, invalid
	closed        *prometheus.CounterVec // code
	messagesIn    prometheus.Counter
	messagesOut   prometheus.Counter
	bytesIn       prometheus.Counter
	bytesOut      prometheus.Counter
	autoResponses prometheus.Counter
	nodeCloses    *prometheus.CounterVec // reason
	failures      *prometheus.CounterVec // op (failure.go)
	// broadcastWrites: sockets a broadcast wrote directly, by way.
	uringWrites, eachWrites prometheus.Counter
}

// newMetrics registers the metrics on r (nil: kept, not exported). A
// second Owner on the same registry shares the registered series.
func newMetrics(r prometheus.Registerer) (*metrics, error) {
	var errs []error
	counter := func(name, help string) prometheus.Counter {
		c, err := metricreg.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
		errs = append(errs, err)
		return c
	}
	vec := func(name, help, label string) *prometheus.CounterVec {
		c, err := metricreg.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{label}))
		errs = append(errs, err)
		return c
	}
	messages := vec("wasmkeep_websocket_messages_total", "WebSocket data messages, by direction (in from clients, out to clients; auto-responses included).", "direction")
	bytes := vec("wasmkeep_websocket_bytes_total", "Payload bytes of WebSocket data messages, by direction.", "direction")
	open, err := metricreg.Register(r, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "wasmkeep_websockets_open",
		Help: "WebSocket slots held on this node (open and closing sockets).",
	}))
	errs = append(errs, err)
	queued, err := metricreg.Register(r, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "wasmkeep_websocket_queued_bytes",
		Help: "Bytes the node's WebSockets hold until written: their send queues (a broadcast counted once per socket that has not written it), the frames being written, and what is kept for sockets being accepted; bounded by the send queue total.",
	}))
	errs = append(errs, err)
	broadcastWrites := vec("wasmkeep_websocket_broadcast_writes_total",
		"Sockets a broadcast wrote to directly, by way: io_uring (submitted together) or write (one write(2) each: io_uring off, refused, or every ring busy).", "way")
	m := &metrics{
		uringWrites: broadcastWrites.WithLabelValues("io_uring"),
		eachWrites:  broadcastWrites.WithLabelValues("write"),
		open:        open,
		queued:      queued,
		accepted:    counter("wasmkeep_websocket_accepted_total", "WebSocket upgrades accepted."),
		dials: vec("wasmkeep_websocket_dials_total",
			"Outbound WebSockets actors asked for, by result: opened, failed (refused by the egress allow-list, no connection, or a failed handshake), invalid, max_sockets, shut_down.", "result"),
		refused: vec("wasmkeep_websocket_refused_total",
			"WebSocket upgrades refused before switching protocols, by reason (max_sockets, shut_down, handshake, invalid).", "reason"),
		closed: vec("wasmkeep_websocket_closed_total",
			"Sockets freed, by the code they ended with: the client's close code, the code of the node's fault close, or 1006 when no close frame came (3xxx and 4xxx group application codes).", "code"),
		messagesIn:    messages.WithLabelValues("in"),
		messagesOut:   messages.WithLabelValues("out"),
		bytesIn:       bytes.WithLabelValues("in"),
		bytesOut:      bytes.WithLabelValues("out"),
		autoResponses: counter("wasmkeep_websocket_auto_responses_total", "Messages answered by an actor's auto-response without waking it."),
		nodeCloses: vec("wasmkeep_websocket_node_closes_total",
			"Sockets whose close the node started, by reason: actor (the actor closed it), a reason of the ownership core (drain, stop, lapse, move, sweep, ...), message_too_big, slow_reader, ping_timeout, protocol_error, invalid_utf8, internal_error (the socket owner of its actor failed).", "reason"),
		failures: vec("wasmkeep_websocket_owner_failures_total",
			"Failures of the socket owner of one actor (a panic recovered while acting for its sockets), each of which closed that actor's sockets with 1011, by where: send, broadcast, close, close_actor, close_all, list, attachment, auto_response, reader, writer, pinger.", "op"),
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("sockets metrics: %w", err)
	}
	return m, nil
}

// codeLabel is the closed_total label of a close code.
func codeLabel(code int) string {
	switch {
	case code >= 3000 && code < 4000:
		return "3xxx"
	case code >= 4000 && code < 5000:
		return "4xxx"
	}
	return strconv.Itoa(code)
}
