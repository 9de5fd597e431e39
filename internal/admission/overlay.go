package admission

// overlay is one batch's staged changes to a map the ledger holds. Reads
// see a staged value before the ledger's; every change records its undo
// on the batch's stack, so that a request that fails drops only what it
// staged. The ledger's map is read, never written: apply publishes the
// staged values once the batch commits.
type overlay[K comparable, V any] struct {
	staged map[K]V
	base   map[K]V
	undo   *[]func()
}

// newOverlay returns an empty overlay over base (nil for none) whose
// undos go on undo.
func newOverlay[K comparable, V any](base map[K]V, undo *[]func()) overlay[K, V] {
	return overlay[K, V]{staged: map[K]V{}, base: base, undo: undo}
}

// get returns k's value, staged or in the ledger.
func (o overlay[K, V]) get(k K) (V, bool) {
	if v, ok := o.staged[k]; ok {
		return v, true
	}
	v, ok := o.base[k]
	return v, ok
}

// set stages v as k's value.
func (o overlay[K, V]) set(k K, v V) {
	old, had := o.staged[k]
	*o.undo = append(*o.undo, func() {
		if had {
			o.staged[k] = old
		} else {
			delete(o.staged, k)
		}
	})
	o.staged[k] = v
}

// all returns every value, the staged one where k has both.
func (o overlay[K, V]) all() []V {
	out := make([]V, 0, len(o.base)+len(o.staged))
	for k, v := range o.base {
		if _, staged := o.staged[k]; !staged {
			out = append(out, v)
		}
	}
	for _, v := range o.staged {
		out = append(out, v)
	}
	return out
}
