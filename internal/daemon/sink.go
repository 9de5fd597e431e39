package daemon

import (
	"crypto/sha256"
	"encoding/json"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/controllers"
	"github.com/marshal-dev/marshal/internal/source"
	"github.com/marshal-dev/marshal/internal/state"
	"github.com/marshal-dev/marshal/reconcile"
)

// generation is what survives a restart of an object's identity: its
// generation, the spec it numbers, and when it was first declared.
type generation struct {
	Generation int64     `json:"generation"`
	SpecSum    []byte    `json:"specSum"`
	Created    time.Time `json:"created"`
}

// declarer takes the manifest source's declarations into the stores, and
// keeps generations and creation times across restarts.
type declarer struct {
	stores *controllers.Stores
	db     *state.DB
	clock  clock.PassiveClock
	log    *slog.Logger

	// mu guards gens.
	mu   sync.Mutex
	gens map[reconcile.Key]generation
}

func newDeclarer(stores *controllers.Stores, db *state.DB, clk clock.PassiveClock, log *slog.Logger) (*declarer, error) {
	d := &declarer{stores: stores, db: db, clock: clk, log: log, gens: map[reconcile.Key]generation{}}
	err := db.ForEach(state.Generations, func(k string, v []byte) error {
		key, err := reconcile.ParseKey(k)
		if err != nil {
			return nil
		}
		var g generation
		if json.Unmarshal(v, &g) == nil {
			d.gens[key] = g
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
			delete(d.gens, c.Key)
			persist[c.Key.String()] = nil
			continue
		}
		obj, g, changed := d.stamp(c.Key, c.Declaration.Object)
		if changed {
			d.gens[c.Key] = g
			persist[c.Key.String()], _ = json.Marshal(g)
		}
		d.stores.Decls.Set(c.Key, declaredOf(c.Declaration))
		if _, err := d.stores.Desired.Set(obj); err != nil {
			d.log.Error("storing declared object", "object", c.Key.String(), "err", err)
		}
	}
	d.mu.Unlock()
	if len(persist) > 0 {
		if err := d.db.Write(state.Generations, persist); err != nil {
			d.log.Error("persisting generations", "err", err)
		}
	}
}

// stamp returns a copy of obj with its generation and creation time, and
// the generation record to keep. The caller holds d.mu.
func (d *declarer) stamp(key reconcile.Key, obj v1alpha1.Object) (v1alpha1.Object, generation, bool) {
	spec, _ := json.Marshal(reflect.ValueOf(obj).Elem().FieldByName("Spec").Interface())
	sum := sha256.Sum256(spec)
	g, known := d.gens[key]
	changed := false
	switch {
	case !known:
		g = generation{Generation: 1, SpecSum: sum[:], Created: d.clock.Now().UTC().Truncate(time.Second)}
		changed = true
	case string(g.SpecSum) != string(sum[:]):
		g.Generation++
		g.SpecSum = sum[:]
		changed = true
	}
	cp := reconcile.DeepCopy(obj)
	meta := cp.GetObjectMeta()
	meta.Generation = g.Generation
	meta.CreationTimestamp = g.Created
	return cp, g, changed
}

func declaredOf(d *source.Declaration) controllers.Declared {
	out := controllers.Declared{File: d.File, Line: d.Line, Conflicts: d.Conflicts}
	for _, e := range d.Invalid {
		out.Invalid = append(out.Invalid, e.Error())
	}
	return out
}
