package intake

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"sync"

	"github.com/marshal-dev/marshal/api/loader"
	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/state"
)

// persisted is the stored form of one last good object.
type persisted struct {
	Line   int             `json:"line"`
	Kind   string          `json:"kind"`
	Object json.RawMessage `json:"object"`
}

func encodeGood(objs []loader.Object) []byte {
	ps := make([]persisted, 0, len(objs))
	for _, o := range objs {
		raw, err := json.Marshal(o.Object)
		if err != nil {
			continue
		}
		ps = append(ps, persisted{Line: o.Line, Kind: o.GetTypeMeta().Kind, Object: raw})
	}
	b, _ := json.Marshal(ps)
	return b
}

func decodeGood(rel string, data []byte) ([]loader.Object, error) {
	var ps []persisted
	if err := json.Unmarshal(data, &ps); err != nil {
		return nil, err
	}
	objs := make([]loader.Object, 0, len(ps))
	for _, p := range ps {
		obj := v1alpha1.New(p.Kind)
		if obj == nil {
			return nil, fmt.Errorf("unknown kind %q", p.Kind)
		}
		if err := json.Unmarshal(p.Object, obj); err != nil {
			return nil, err
		}
		objs = append(objs, loader.Object{Object: obj, File: rel, Line: p.Line})
	}
	return objs, nil
}

// lastGood writes the last good objects to the Store in the background,
// so that the loop never waits for the disk: what it is handed is merged
// with what is still pending, the latest version of each file winning,
// and written in one transaction. A crash may lose the latest versions;
// a later start then restores older ones, and only for files that do not
// load by then.
type lastGood struct {
	store  Store
	bucket state.Bucket
	log    *slog.Logger
	wake   chan struct{} // holds a value while something is pending

	// mu guards pending.
	mu      sync.Mutex
	pending map[string][]byte // file → encoded objects; nil deletes
}

func newLastGood(store Store, bucket state.Bucket, log *slog.Logger) *lastGood {
	return &lastGood{store: store, bucket: bucket, log: log, wake: make(chan struct{}, 1), pending: map[string][]byte{}}
}

// put hands writes over.
func (g *lastGood) put(writes map[string][]byte) {
	if len(writes) == 0 {
		return
	}
	g.mu.Lock()
	maps.Copy(g.pending, writes)
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// run writes what is handed over until ctx ends, and what is pending then.
func (g *lastGood) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			g.write()
			return
		case <-g.wake:
			g.write()
		}
	}
}

func (g *lastGood) write() {
	g.mu.Lock()
	writes := g.pending
	g.pending = map[string][]byte{}
	g.mu.Unlock()
	if len(writes) == 0 {
		return
	}
	if err := g.store.Write(g.bucket, writes); err != nil {
		g.log.Error("persisting last good manifests", "err", err)
	}
}
