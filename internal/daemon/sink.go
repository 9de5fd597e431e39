package daemon

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/marshal-dev/marshal/controllers"
	"github.com/marshal-dev/marshal/internal/source"
	"github.com/marshal-dev/marshal/internal/state"
	"github.com/marshal-dev/marshal/reconcile"
)

// generation is what survives a restart of an object's identity: the
// count of its spec changes (the desired store's, which owns it) and
// when it was first declared.
type generation struct {
	Generation int64     `json:"generation"`
	SpecSum    []byte    `json:"specSum"`
	Created    time.Time `json:"created"`
}

// declarer takes the manifest source's declarations into the stores, and
// keeps generations and creation times across restarts: it restores the
// desired store's counts at start, stamps creation times, and saves what
// changed.
type declarer struct {
	stores *controllers.Stores
	db     *state.DB
	clock  clock.PassiveClock
	log    *slog.Logger

	// mu guards saved.
	mu sync.Mutex
	// saved holds the records as the state database has them.
	saved map[reconcile.Key]generation
}

func newDeclarer(stores *controllers.Stores, db *state.DB, clk clock.PassiveClock, log *slog.Logger) (*declarer, error) {
	d := &declarer{stores: stores, db: db, clock: clk, log: log, saved: map[reconcile.Key]generation{}}
	err := db.ForEach(state.Generations, func(k string, v []byte) error {
		key, err := reconcile.ParseKey(k)
		if err != nil {
			return nil
		}
		var g generation
		if json.Unmarshal(v, &g) != nil {
			return nil
		}
		d.saved[key] = g
		var sum reconcile.SpecSum
		if copy(sum[:], g.SpecSum) == len(sum) {
			stores.Desired.Restore(key, reconcile.Generation{Generation: g.Generation, Spec: sum})
		}
		return nil
	})
	return d, err
}

// Declare implements source.Sink.
func (d *declarer) Declare(changes []source.Change) {
	persist := map[string][]byte{}
	d.mu.Lock()
	for _, c := range changes {
		if c.Declaration == nil {
			d.stores.Desired.Delete(c.Key)
			d.stores.Decls.Delete(c.Key)
			delete(d.saved, c.Key)
			persist[c.Key.String()] = nil
			continue
		}
		saved, known := d.saved[c.Key]
		created := saved.Created
		if !known {
			created = d.clock.Now().UTC().Truncate(time.Second)
		}
		// The source's object is its own: the stamp goes on a copy.
		obj := c.Declaration.Object.DeepCopyObject()
		obj.GetObjectMeta().CreationTimestamp = created
		d.stores.Decls.Set(c.Key, declaredOf(c.Declaration))
		if _, err := d.stores.Desired.Set(obj); err != nil {
			d.log.Error("storing declared object", "object", c.Key.String(), "err", err)
			continue
		}
		g, _ := d.stores.Desired.GenerationOf(c.Key)
		rec := generation{Generation: g.Generation, SpecSum: g.Spec[:], Created: created}
		if !known || rec.Generation != saved.Generation || !bytes.Equal(rec.SpecSum, saved.SpecSum) {
			d.saved[c.Key] = rec
			persist[c.Key.String()], _ = json.Marshal(rec)
		}
	}
	d.mu.Unlock()
	if len(persist) > 0 {
		if err := d.db.Write(state.Generations, persist); err != nil {
			d.log.Error("persisting generations", "err", err)
		}
	}
}

func declaredOf(d *source.Declaration) controllers.Declared {
	out := controllers.Declared{File: d.File, Line: d.Line, Conflicts: d.Conflicts}
	for _, e := range d.Invalid {
		out.Invalid = append(out.Invalid, e.Error())
	}
	return out
}
