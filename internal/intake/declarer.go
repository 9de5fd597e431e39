package intake

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/controllers"
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

// Declarer is the Sink of every source of manifests: it takes their
// declarations into the stores, and keeps generations and creation times
// across restarts: it restores the desired store's counts at start,
// stamps creation times, and records each generation before anyone can
// see it as generations.go says: an edit at once, its record in the
// background.
type Declarer struct {
	stores *controllers.Stores
	clock  clock.PassiveClock
	log    *slog.Logger
	writer *generationWriter

	// mu serializes Declare and guards saved.
	mu sync.Mutex
	// saved holds each object's latest record, durable or handed to the
	// writer.
	saved map[reconcile.Key]generation
}

// NewDeclarer restores the desired store's generation counts from db and
// returns the Declarer; Run must then write its records.
func NewDeclarer(stores *controllers.Stores, db *state.DB, clk clock.PassiveClock, log *slog.Logger) (*Declarer, error) {
	d := &Declarer{stores: stores, clock: clk, log: log, saved: map[reconcile.Key]generation{}}
	running, err := db.Get(state.Generations, runningMark)
	if err != nil {
		return nil, err
	}
	// After a crash, each object's count is beyond what the crashed run
	// may have shown, for a spec not known.
	crashed := running != nil
	durable := map[reconcile.Key]int64{}
	err = db.ForEach(state.Generations, func(k string, v []byte) error {
		key, err := reconcile.ParseKey(k)
		if err != nil {
			return nil
		}
		var g generation
		if json.Unmarshal(v, &g) != nil {
			return nil
		}
		d.saved[key] = g
		durable[key] = g.Generation
		var sum reconcile.SpecSum
		switch {
		case crashed:
			stores.Desired.Restore(key, reconcile.Generation{Generation: g.Generation + generationsAhead})
		case copy(sum[:], g.SpecSum) == len(sum):
			stores.Desired.Restore(key, reconcile.Generation{Generation: g.Generation, Spec: sum})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if crashed {
		log.Warn("marshald did not stop cleanly: generations of declared objects move ahead", "by", generationsAhead+1)
	}
	d.writer = newGenerationWriter(db, log, durable, crashed)
	return d, nil
}

// Run writes the records in the background until ctx ends, and every
// record exact then. It must outlast every Declare.
func (d *Declarer) Run(ctx context.Context) { d.writer.run(ctx) }

// Declare implements Sink: it stamps creation times and generations on
// copies of the declared objects and sets them in the stores.
func (d *Declarer) Declare(changes []Change) {
	d.mu.Lock()
	defer d.mu.Unlock()
	records := map[reconcile.Key]record{}
	objs := make([]v1alpha1.Object, len(changes))
	wait := false
	for i, c := range changes {
		if c.Declaration == nil {
			delete(d.saved, c.Key)
			records[c.Key] = record{}
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
		next, err := d.stores.Desired.Next(obj)
		if err != nil {
			d.log.Error("storing declared object", "object", c.Key.String(), "err", err)
			continue
		}
		objs[i] = obj
		rec := generation{Generation: next.Generation, SpecSum: next.Spec[:], Created: created}
		if !known || rec.Generation != saved.Generation || !bytes.Equal(rec.SpecSum, saved.SpecSum) {
			d.saved[c.Key] = rec
			data, _ := json.Marshal(rec)
			records[c.Key] = record{generation: rec.Generation, data: data}
		}
		// A new object's creation time is recorded before it is shown.
		wait = wait || !known || !d.writer.shown(c.Key, next.Generation)
	}
	d.writer.put(records)
	if wait {
		// Shown even when the disk refuses: the error is logged, and the
		// records stay pending for the next commit.
		d.writer.write(false)
	}
	for i, c := range changes {
		switch {
		case c.Declaration == nil:
			d.stores.Desired.Delete(c.Key)
			d.stores.Decls.Delete(c.Key)
		default:
			d.stores.Decls.Set(c.Key, declaredOf(c.Declaration))
			if objs[i] == nil {
				continue
			}
			if _, err := d.stores.Desired.Set(objs[i]); err != nil {
				d.log.Error("storing declared object", "object", c.Key.String(), "err", err)
			}
		}
	}
}

func declaredOf(d *Declaration) controllers.Declared {
	out := controllers.Declared{File: d.File, Line: d.Line, Conflicts: d.Conflicts}
	for _, e := range d.Invalid {
		out.Invalid = append(out.Invalid, e.Error())
	}
	return out
}
