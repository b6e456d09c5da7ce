package main

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/wasmkeep/wasmkeep/examples/chat/page"
	"github.com/wasmkeep/wasmkeep/wasmhost/guest"
)

// A room may follow a feed: "/follow ws://host/feed" dials it (an outbound
// WebSocket the room's actor owns, as it owns its people's sockets), and
// every text message of the feed is posted to the room as said by "feed".
// The feed's socket belongs to the node, so the room sleeps between the
// feed's messages. When the socket closes (the feed ended it, or the room
// left the node that held it), the close event names the URL it was
// dialed to, and the room dials it again; "/unfollow" stops.

// Keys and names of the feed.
const (
	feedURLKey    = "feed/url"    // the URL the room follows, while it does
	feedSocketKey = "feed/socket" // the feed's socket, while open
	feedSinceKey  = "feed/since"  // when it opened, Unix ms
	feedAlarm     = "feed-redial" // dials the feed again, after a failure
	feedFrom      = "feed"        // who the feed's messages are said by
	feedTag       = "feed"        // the tag of the feed's socket
)

// redialAfter is how long after a failed dial, or a socket that closed
// within it of opening, the room dials the feed again: a feed that ends
// every connection at once is not dialed in a loop.
const redialAfter = 3 * time.Second

// follow serves "/follow URL" and "/unfollow", and returns what the room
// posts for them; ok is false for any other text.
func follow(text string) (note string, ok bool, err error) {
	if text == "/unfollow" {
		url, following := guest.Storage.Get(feedURLKey)
		if !following {
			return "not following a feed", true, nil
		}
		closeFeed()
		guest.Storage.Delete(feedURLKey)
		if err := guest.DeleteAlarm(feedAlarm); err != nil {
			return "", true, err
		}
		return "unfollowed " + string(url), true, nil
	}
	rest, ok := strings.CutPrefix(text, "/follow")
	if !ok || rest != "" && rest[0] != ' ' {
		return "", false, nil
	}
	url := strings.TrimSpace(rest)
	if url == "" {
		return "feeds: /follow ws://host/feed, /unfollow", true, nil
	}
	closeFeed()
	if err := guest.Storage.Put(feedURLKey, []byte(url)); err != nil {
		return "", true, err
	}
	if err := dialFeed(url); err != nil {
		if errors.Is(err, guest.ErrUnavailable) {
			return "", true, err // the event fails whatever it answers
		}
		guest.Storage.Delete(feedURLKey)
		return "cannot follow " + url + ": " + strings.TrimPrefix(err.Error(), "guest: "), true, nil
	}
	return "following " + url, true, nil
}

// dialFeed dials the feed at url and keeps its socket.
func dialFeed(url string) error {
	id, err := guest.DialSocket(url, nil, feedTag)
	if err != nil {
		return err
	}
	if err := guest.Storage.Put(feedSocketKey, []byte(strconv.FormatUint(uint64(id), 10))); err != nil {
		return err
	}
	return guest.Storage.Put(feedSinceKey, []byte(strconv.FormatInt(time.Now().UnixMilli(), 10)))
}

// feedSocket is the feed's open socket, if any.
func feedSocket() (guest.SocketID, bool) {
	v, ok := guest.Storage.Get(feedSocketKey)
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseUint(string(v), 10, 64)
	return guest.SocketID(id), err == nil
}

// closeFeed closes the feed's socket, if open. Its close event comes
// later, and finds the socket no longer the room's feed.
func closeFeed() {
	if id, ok := feedSocket(); ok {
		guest.Sockets.Close(id, 1000, "unfollowed")
	}
	guest.Storage.Delete(feedSocketKey)
	guest.Storage.Delete(feedSinceKey)
}

// onFeed serves an event of a socket the room dialed: a message of the
// feed is posted to the room; the close of the feed's socket has the room
// dial the URL it names again, if the room still follows it.
func onFeed(ev *guest.SocketEvent) error {
	id, current := feedSocket()
	current = current && id == ev.Socket
	if ev.Kind == guest.SocketMessage {
		if !current || !ev.Text {
			return nil // an old feed's last words, or bytes
		}
		if text := page.Clean(string(ev.Data), page.MaxText); text != "" {
			return post(feedFrom, text)
		}
		return nil
	}
	if !current {
		return nil // a feed the room left
	}
	since, _ := guest.Storage.Get(feedSinceKey)
	guest.Storage.Delete(feedSocketKey)
	guest.Storage.Delete(feedSinceKey)
	url, ok := guest.Storage.Get(feedURLKey)
	if !ok || string(url) != ev.URL {
		return nil
	}
	if ms, err := strconv.ParseInt(string(since), 10, 64); err == nil && time.Since(time.UnixMilli(ms)) < redialAfter {
		return guest.SetAlarm(feedAlarm, time.Now().Add(redialAfter))
	}
	return redial(ev.URL)
}

// redial dials the feed at url again, or has the alarm try later.
func redial(url string) error {
	err := dialFeed(url)
	if err == nil || errors.Is(err, guest.ErrUnavailable) {
		return err
	}
	guest.Log(guest.LevelInfo, "room-wasm: feed "+url+": "+err.Error()+"; dialing again later")
	return guest.SetAlarm(feedAlarm, time.Now().Add(redialAfter))
}

// onFeedAlarm dials the feed again, if the room follows one and its socket
// is not open.
func onFeedAlarm() error {
	url, ok := guest.Storage.Get(feedURLKey)
	if _, open := feedSocket(); !ok || open {
		return nil
	}
	return redial(string(url))
}
