package intake

import (
	"context"
	"log/slog"
	"sync"

	"github.com/marshal-dev/marshal/internal/state"
	"github.com/marshal-dev/marshal/reconcile"
)

// What a generation record guarantees, and what it costs.
//
// An object's generation, once anyone may have seen it (in
// metadata.generation, or in status.observedGeneration once the object
// is reconciled), is never shown again for another spec, nor followed by
// a lower one, across any restart or crash of marshald. Only one thing
// has to be durable before a generation is shown, and it is not the
// generation itself:
//
//   - a bound: no object is shown a generation more than
//     generationsAhead above the one its durable record holds;
//   - the running mark: a run that shows a generation its durable record
//     does not hold yet has first made durable that it may do so.
//
// A start that finds the running mark (the run before it did not stop
// cleanly) takes every record's generation plus generationsAhead as the
// object's count, for a spec it does not know: each object's next
// declaration is one above anything the crashed run may have shown. A
// clean stop writes every record exact and removes the mark in one
// transaction, and the next start goes on from the exact counts. So an
// edit is shown at once, its record written in the background with
// whatever else is pending; a declaration waits for a commit only when
// its object is new (its creation time is recorded before it is shown),
// when it would run more than generationsAhead ahead of its record (the
// disk has fallen that far behind), or before the running mark is
// durable at start. After a crash a generation jumps by at most
// generationsAhead + 1; it never goes back.

// generationsAhead is how far an object's shown generation may run ahead
// of its durable record: the most a crash can make a generation jump, and
// the number of edits of one object the disk may fall behind before an
// edit waits for it.
const generationsAhead = 100

// runningMark is the key, in state.Generations, of the running mark. It
// is no "Kind/name" key, so no record has it.
const runningMark = "running"

// generationWriter writes generation records to the state database in
// the background, merging what is pending so that the latest record of
// each object wins, and knows which generations their records make safe
// to show.
type generationWriter struct {
	db   *state.DB
	log  *slog.Logger
	wake chan struct{} // holds a value while something is pending

	// committing is held from taking a batch until it is written, so that
	// batches land in the order they were taken.
	committing sync.Mutex

	// mu guards the fields below.
	mu      sync.Mutex
	pending map[reconcile.Key]record
	// durable is the generation of each object's durable record.
	durable map[reconcile.Key]int64
	// ahead is generationsAhead once the running mark is durable, 0
	// before.
	ahead int64
}

func newGenerationWriter(db *state.DB, log *slog.Logger, durable map[reconcile.Key]int64, running bool) *generationWriter {
	w := &generationWriter{
		db: db, log: log, wake: make(chan struct{}, 1),
		pending: map[reconcile.Key]record{}, durable: durable,
	}
	if running {
		w.ahead = generationsAhead
	}
	return w
}

// shown reports whether gen of key may be shown now: key has a durable
// record, and gen runs at most the allowed distance ahead of it.
func (w *generationWriter) shown(key reconcile.Key, gen int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	d, ok := w.durable[key]
	return ok && gen <= d+w.ahead
}

// record is one object's generation record as handed to the writer:
// data nil deletes it.
type record struct {
	generation int64
	data       []byte
}

// put hands records over to be written.
func (w *generationWriter) put(records map[reconcile.Key]record) {
	if len(records) == 0 {
		return
	}
	w.mu.Lock()
	for k, v := range records {
		w.pending[k] = v
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// run writes the running mark, then what is handed over, until ctx ends;
// then it writes what is pending and removes the mark, in one
// transaction. It must outlast every Declare.
func (w *generationWriter) run(ctx context.Context) {
	w.write(false)
	for {
		select {
		case <-ctx.Done():
			w.write(true)
			return
		case <-w.wake:
			w.write(false)
		}
	}
}

// write commits what is pending now, with the running mark, or with its
// removal when last. A batch that fails is pending again, under what was
// handed over since, and is tried with the next.
func (w *generationWriter) write(last bool) error {
	w.committing.Lock()
	defer w.committing.Unlock()
	w.mu.Lock()
	batch := w.pending
	w.pending = map[reconcile.Key]record{}
	w.mu.Unlock()

	puts := make(map[string][]byte, len(batch)+1)
	for k, r := range batch {
		puts[k.String()] = r.data
	}
	puts[runningMark] = []byte("1")
	if last {
		puts[runningMark] = nil
	}
	err := w.db.Write(state.Generations, puts)

	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		for k, r := range batch {
			if _, newer := w.pending[k]; !newer {
				w.pending[k] = r
			}
		}
		w.log.Error("persisting generations", "err", err)
		return err
	}
	for k, r := range batch {
		if r.data == nil {
			delete(w.durable, k)
		} else {
			w.durable[k] = r.generation
		}
	}
	w.ahead = generationsAhead
	if last {
		w.ahead = 0
	}
	return nil
}
