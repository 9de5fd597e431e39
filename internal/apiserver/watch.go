package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/localapi"
	"github.com/marshal-dev/marshal/reconcile"
)

// stream writes one JSON value per line and flushes each, so a watcher
// sees every change as it happens.
type stream struct {
	rc  *http.ResponseController
	enc *json.Encoder
}

func startStream(w http.ResponseWriter) (*stream, error) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	s := &stream{rc: http.NewResponseController(w), enc: json.NewEncoder(w)}
	// The client learns at once that the watch is established, even when
	// there is nothing to send yet.
	return s, s.rc.Flush()
}

func (s *stream) send(v any) error {
	if err := s.enc.Encode(v); err != nil {
		return err
	}
	return s.rc.Flush()
}

// watchObjects streams the objects of res that sel matches (one that
// stops matching is DELETED): ADDED for every current one,
// then, at each change, DELETED, ADDED and MODIFIED for the objects that
// differ, by encoded bytes, from what was sent last. It reads and encodes
// only the objects the daemon names as changed, so that a change costs
// the same however many objects there are; when the daemon cannot name
// them, it lists the kind again. It ends when the client goes away or the
// server stops.
func (s *Server) watchObjects(w http.ResponseWriter, r *http.Request, res localapi.Resource, sel labels.Selector) error {
	ctx := r.Context()
	_, seq, wake, _ := s.d.Changed(res.Kind, 0)
	items, err := s.listSelected(ctx, res.Kind, sel)
	if err != nil {
		return err
	}
	st, err := startStream(w)
	if err != nil {
		return nil // the client is gone
	}
	sent := map[string]json.RawMessage{}
	err = sendAll(st, items, sent)
	for err == nil {
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		}
		var names []string
		var known bool
		names, seq, wake, known = s.d.Changed(res.Kind, seq)
		if known {
			err = s.sendNamed(ctx, st, res.Kind, sel, names, sent)
			continue
		}
		if items, err = s.listSelected(ctx, res.Kind, sel); err == nil {
			err = sendAll(st, items, sent)
		}
	}
	if ctx.Err() == nil && !errors.Is(err, errClientGone) {
		s.endWatch(st, r, err)
	}
	return nil
}

// sendAll sends what turns sent into items, and makes sent items.
func sendAll(st *stream, items []any, sent map[string]json.RawMessage) error {
	next, order, err := encodeItems(items)
	if err != nil {
		return err
	}
	if err := sendChanges(st, sent, next, order); err != nil {
		return errClientGone
	}
	clear(sent)
	maps.Copy(sent, next)
	return nil
}

// errClientGone is a send that failed: the client went away.
var errClientGone = errors.New("the client is gone")

// sendNamed sends what changed among the objects names of kind that sel
// matches, against sent, which it updates: deletions first (an object
// that no longer matches is deleted), then additions and modifications,
// each in name order.
func (s *Server) sendNamed(ctx context.Context, st *stream, kind string, sel labels.Selector, names []string, sent map[string]json.RawMessage) error {
	var gone []string
	var changed []*localapi.WatchEvent
	for _, name := range names {
		obj, err := s.d.Get(ctx, kind, name)
		if err == nil && !sel.Matches(labels.Set(labelsOf(obj))) {
			err = ErrNotFound
		}
		if errors.Is(err, ErrNotFound) {
			if _, ok := sent[name]; ok {
				gone = append(gone, name)
			}
			continue
		}
		if err != nil {
			return err
		}
		data, err := json.Marshal(obj)
		if err != nil {
			return fmt.Errorf("encoding %T: %w", obj, err)
		}
		prev, ok := sent[name]
		switch {
		case !ok:
			changed = append(changed, &localapi.WatchEvent{Type: localapi.Added, Object: data})
		case !bytes.Equal(prev, data):
			changed = append(changed, &localapi.WatchEvent{Type: localapi.Modified, Object: data})
		}
		sent[name] = data
	}
	for _, name := range gone {
		if err := st.send(&localapi.WatchEvent{Type: localapi.Deleted, Object: sent[name]}); err != nil {
			return errClientGone
		}
		delete(sent, name)
	}
	for _, ev := range changed {
		if err := st.send(ev); err != nil {
			return errClientGone
		}
	}
	return nil
}

// endWatch sends err as the last line of a watch.
func (s *Server) endWatch(st *stream, r *http.Request, err error) {
	_, code := classify(err)
	if code == localapi.CodeInternal {
		s.log.Error("local API: watch failed", "path", r.URL.Path, "err", err)
	}
	obj, _ := json.Marshal(&localapi.Error{Code: code, Message: err.Error()})
	_ = st.send(&localapi.WatchEvent{Type: localapi.WatchError, Object: obj})
}

// encodeItems encodes every item and keys it by its metadata.name,
// returning the names in list order.
func encodeItems(items []any) (map[string]json.RawMessage, []string, error) {
	byName := make(map[string]json.RawMessage, len(items))
	order := make([]string, 0, len(items))
	for _, item := range items {
		data, err := json.Marshal(item)
		if err != nil {
			return nil, nil, fmt.Errorf("encoding %T: %w", item, err)
		}
		name, err := nameOf(item, data)
		if err != nil {
			return nil, nil, err
		}
		if _, dup := byName[name]; !dup {
			order = append(order, name)
		}
		byName[name] = data
	}
	return byName, order, nil
}

// nameOf returns the metadata.name of item, encoded as data.
func nameOf(item any, data []byte) (string, error) {
	switch o := item.(type) {
	case v1alpha1.Object:
		return o.GetObjectMeta().Name, nil
	case *v1alpha1.Agent:
		return o.Metadata.Name, nil
	}
	var meta struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(data, &meta); err != nil {
		return "", fmt.Errorf("reading the name of %T: %w", item, err)
	}
	return meta.Metadata.Name, nil
}

// sendChanges sends what turns last into next: deletions first, in name
// order, then additions and modifications in list order.
func sendChanges(st *stream, last, next map[string]json.RawMessage, order []string) error {
	var gone []string
	for name := range last {
		if _, ok := next[name]; !ok {
			gone = append(gone, name)
		}
	}
	slices.Sort(gone)
	for _, name := range gone {
		if err := st.send(&localapi.WatchEvent{Type: localapi.Deleted, Object: last[name]}); err != nil {
			return err
		}
	}
	for _, name := range order {
		typ := localapi.Added
		if prev, ok := last[name]; ok {
			if bytes.Equal(prev, next[name]) {
				continue
			}
			typ = localapi.Modified
		}
		if err := st.send(&localapi.WatchEvent{Type: typ, Object: next[name]}); err != nil {
			return err
		}
	}
	return nil
}

// watchEvents streams the events after after (about key, unless zero),
// then every event recorded later, including repeats, which come again
// with a larger Seq and their new count.
func (s *Server) watchEvents(w http.ResponseWriter, r *http.Request, key reconcile.Key, after uint64) error {
	ctx := r.Context()
	evs, more := s.d.Events(key, after)
	st, err := startStream(w)
	if err != nil {
		return nil
	}
	for {
		for i := range evs {
			if err := st.send(&evs[i]); err != nil {
				return nil
			}
			after = max(after, evs[i].Seq)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-more:
		}
		evs, more = s.d.Events(key, after)
	}
}
