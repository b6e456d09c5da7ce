package main

import (
	"errors"
	"strconv"
	"strings"

	"github.com/wasmkeep/wasmkeep/examples/chat/page"
	"github.com/wasmkeep/wasmkeep/wasmhost/guest"
)

// A room may ask a web service: "/ask http://host/path" sends a GET there
// (an outbound request, to a host the node's --egress-allow allows) and
// posts the first line of the answer as said by "web". The request is a
// commit point: what the room stored before it is durable when it leaves.

// askFrom is who the answers are said by.
const askFrom = "web"

// ask serves "/ask URL", and returns what the room posts for it; ok is
// false for any other text.
func ask(text string) (note string, ok bool) {
	url, ok := strings.CutPrefix(text, "/ask ")
	if !ok {
		return "", false
	}
	resp, err := guest.Fetch(&guest.FetchRequest{URL: strings.TrimSpace(url)})
	switch {
	case errors.Is(err, guest.ErrFetchRefused):
		return "not allowed: " + url + " (the node's --egress-allow)", true
	case err != nil:
		return "no answer from " + url + ": " + err.Error(), true
	}
	line, _, _ := strings.Cut(string(resp.Body), "\n")
	return page.Clean(strconv.Itoa(resp.Status)+" "+line, page.MaxText), true
}
