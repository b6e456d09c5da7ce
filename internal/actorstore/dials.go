package actorstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/wasmkeep/wasmkeep/actors"
)

// An actor's outbound sockets (actors.DialSocket) are node keys of its
// storage, one per socket it dialed and has not had the close event of:
//
//	NodePrefix+"dial/"+<stamp>-<id>  ->  {"url": ..., "tags": [...]}
//
// where stamp names the node's socket owner that holds the socket
// (sockets.Owner.Stamp) and id is its socket ID there, both 16 hex
// digits. A record whose socket is not open where the actor wakes names a
// socket that closed while the actor was away: its close event is due.
const dialPrefix = actors.NodePrefix + "dial/"

// DialRecord is one outbound socket as its actor keeps it.
type DialRecord struct {
	Stamp uint64   `json:"-"`
	ID    uint64   `json:"-"`
	URL   string   `json:"url"`
	Tags  []string `json:"tags,omitempty"`
}

var errDial = errors.New("outbound socket record damaged")

func dialKey(stamp, id uint64) string { return fmt.Sprintf("%s%016x-%016x", dialPrefix, stamp, id) }

// PutDial records the outbound socket id of the socket owner stamp.
func (t *Txn) PutDial(r DialRecord) error {
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return t.nodePut(dialKey(r.Stamp, r.ID), v)
}

// Dial reads the record of the outbound socket id of stamp, if any.
func (t *Txn) Dial(stamp, id uint64) (DialRecord, bool, error) {
	v, ok := t.nodeGet(dialKey(stamp, id))
	if !ok {
		return DialRecord{}, false, nil
	}
	r, err := decodeDial(dialKey(stamp, id), v)
	return r, err == nil, err
}

// DeleteDial deletes the record of the outbound socket id of stamp.
func (t *Txn) DeleteDial(stamp, id uint64) {
	if _, ok := t.nodeGet(dialKey(stamp, id)); ok {
		t.nodeDelete(dialKey(stamp, id))
	}
}

// Dials lists the actor's outbound socket records.
func (t *Txn) Dials() ([]DialRecord, error) {
	var out []DialRecord
	for _, e := range t.nodeList(actors.ListOptions{Prefix: dialPrefix}) {
		r, err := decodeDial(e.Key, e.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func decodeDial(key string, v []byte) (DialRecord, error) {
	var r DialRecord
	if _, err := fmt.Sscanf(strings.TrimPrefix(key, dialPrefix), "%016x-%016x", &r.Stamp, &r.ID); err != nil {
		return r, fmt.Errorf("%q: %w", key, errDial)
	}
	if err := json.Unmarshal(v, &r); err != nil {
		return r, fmt.Errorf("%q: %w: %v", key, errDial, err)
	}
	return r, nil
}
