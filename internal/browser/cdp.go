package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// ErrClosed is returned by calls made after the browser's DevTools
// connection has closed, whether by Close or because Chromium exited.
var ErrClosed = errors.New("browser: devtools connection closed")

// ProtocolError is an error reply from Chromium to a DevTools command, such as
// an unknown method or a target that no longer exists.
type ProtocolError struct {
	Method  string `json:"-"`
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    string `json:"data,omitempty"`
}

func (e *ProtocolError) Error() string {
	msg := fmt.Sprintf("browser: %s: %s (code %d)", e.Method, e.Message, e.Code)
	if e.Data != "" {
		msg += ": " + e.Data
	}
	return msg
}

// message is one DevTools Protocol frame in either direction: a command
// (ID, Method, Params), its reply (ID, Result or Error) or an event
// (Method, Params, no ID). SessionID routes it to an attached page.
type message struct {
	ID        int64           `json:"id,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    any             `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *ProtocolError  `json:"error,omitempty"`
}

// incoming is a message as read, with Params left raw for the event handler.
type incoming struct {
	message
	Params json.RawMessage `json:"params,omitempty"`
}

// eventHandler receives the events of one session. It runs on the read
// goroutine, so it must not block or call back into the conn.
type eventHandler func(method string, params json.RawMessage)

// conn is one DevTools websocket with commands matched to replies by id.
//
// Invariant: a single goroutine (readLoop) reads the websocket; writes are
// serialized by writeMu, as gorilla/websocket allows one reader and one writer.
type conn struct {
	ws      *websocket.Conn
	writeMu sync.Mutex

	mu       sync.Mutex
	nextID   int64
	pending  map[int64]chan *incoming
	sessions map[string]eventHandler
	readErr  error // why readLoop stopped; set before done is closed

	done chan struct{} // closed when readLoop returns
}

// dial connects to a DevTools websocket URL and starts reading it.
func dial(ctx context.Context, url string) (*conn, error) {
	ws, _, err := websocket.DefaultDialer.DialContext(ctx, url, nil)
	if err != nil {
		return nil, fmt.Errorf("browser: dial devtools %s: %w", url, err)
	}
	c := &conn{
		ws:       ws,
		pending:  make(map[int64]chan *incoming),
		sessions: make(map[string]eventHandler),
		done:     make(chan struct{}),
	}
	go c.readLoop()
	return c, nil
}

func (c *conn) readLoop() {
	defer close(c.done)
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			c.mu.Lock()
			c.readErr = err
			c.mu.Unlock()
			return
		}
		var m incoming
		if err := json.Unmarshal(data, &m); err != nil {
			// Chromium only sends JSON; a frame we cannot parse is skipped
			// rather than tearing down every page's connection.
			continue
		}
		c.mu.Lock()
		if m.ID != 0 {
			if ch, ok := c.pending[m.ID]; ok {
				delete(c.pending, m.ID)
				ch <- &m // buffered: never blocks
			}
		} else if h := c.sessions[m.SessionID]; h != nil && m.Method != "" {
			h(m.Method, m.Params)
		}
		c.mu.Unlock()
	}
}

// call sends a command and waits for its reply, ctx or the connection's end.
// sessionID is empty for browser-level commands. The reply's result is
// decoded into result unless result is nil.
func (c *conn) call(ctx context.Context, sessionID, method string, params, result any) error {
	ch := make(chan *incoming, 1)
	c.mu.Lock()
	if c.readErr != nil {
		c.mu.Unlock()
		return fmt.Errorf("%s: %w", method, ErrClosed)
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}

	data, err := json.Marshal(message{ID: id, SessionID: sessionID, Method: method, Params: params})
	if err != nil {
		forget()
		return fmt.Errorf("browser: encode %s: %w", method, err)
	}
	if err := c.write(ctx, data); err != nil {
		forget()
		return fmt.Errorf("browser: send %s: %w", method, err)
	}

	select {
	case m := <-ch:
		if m.Error != nil {
			m.Error.Method = method
			return m.Error
		}
		if result == nil {
			return nil
		}
		if err := json.Unmarshal(m.Result, result); err != nil {
			return fmt.Errorf("browser: decode %s reply: %w", method, err)
		}
		return nil
	case <-ctx.Done():
		forget()
		return fmt.Errorf("browser: %s: %w", method, ctx.Err())
	case <-c.done:
		return fmt.Errorf("browser: %s: %w", method, ErrClosed)
	}
}

// writeTimeout bounds one write, so a browser that stops reading cannot
// hang a caller forever.
//
// Invariant: the write deadline is never the caller's ctx deadline. A write
// that times out leaves gorilla/websocket's connection unusable, and one
// caller's short timeout must not break every page of the browser.
const writeTimeout = 10 * time.Second

func (c *conn) write(ctx context.Context, data []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	c.ws.SetWriteDeadline(time.Now().Add(writeTimeout))
	return c.ws.WriteMessage(websocket.TextMessage, data)
}

// subscribe routes the events of sessionID to h until unsubscribe.
func (c *conn) subscribe(sessionID string, h eventHandler) {
	c.mu.Lock()
	c.sessions[sessionID] = h
	c.mu.Unlock()
}

func (c *conn) unsubscribe(sessionID string) {
	c.mu.Lock()
	delete(c.sessions, sessionID)
	c.mu.Unlock()
}

// close closes the websocket and waits for readLoop to return.
func (c *conn) close() error {
	err := c.ws.Close()
	<-c.done
	return err
}
