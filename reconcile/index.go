package reconcile

import (
	"cmp"
	"slices"
	"sync"
)

// Index records which objects reference which, so that a change to a
// target reaches exactly the objects that reference it: a Profile change
// enqueues the Workspaces naming that profile, not every Workspace. A store
// keeps an Index current as objects change (DesiredStore.AddIndex,
// Store.AddIndex); Referrers is a MapFunc for EnqueueMapped.
//
// An Index is safe for concurrent use.
type Index struct {
	// mu guards the fields that follow.
	mu sync.RWMutex
	// targets maps a referrer to the keys it references.
	targets map[Key][]Key
	// referrers maps a target to the keys that reference it.
	referrers map[Key]map[Key]struct{}
}

// NewIndex returns an empty Index.
func NewIndex() *Index {
	return &Index{
		targets:   make(map[Key][]Key),
		referrers: make(map[Key]map[Key]struct{}),
	}
}

// Set records that referrer references exactly targets, replacing what it
// referenced before. Its cost is proportional to the old and new targets.
func (ix *Index) Set(referrer Key, targets ...Key) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.setLocked(referrer, targets)
}

// Delete forgets referrer and everything it referenced.
func (ix *Index) Delete(referrer Key) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.setLocked(referrer, nil)
}

func (ix *Index) setLocked(referrer Key, targets []Key) {
	for _, t := range ix.targets[referrer] {
		if rs := ix.referrers[t]; rs != nil {
			delete(rs, referrer)
			if len(rs) == 0 {
				delete(ix.referrers, t)
			}
		}
	}
	if len(targets) == 0 {
		delete(ix.targets, referrer)
		return
	}
	ix.targets[referrer] = slices.Clone(targets)
	for _, t := range targets {
		rs := ix.referrers[t]
		if rs == nil {
			rs = make(map[Key]struct{})
			ix.referrers[t] = rs
		}
		rs[referrer] = struct{}{}
	}
}

// Referrers returns the keys that reference target, sorted by kind then
// name. Its cost is proportional to their number.
func (ix *Index) Referrers(target Key) []Key {
	ix.mu.RLock()
	rs := ix.referrers[target]
	keys := make([]Key, 0, len(rs))
	for k := range rs {
		keys = append(keys, k)
	}
	ix.mu.RUnlock()
	slices.SortFunc(keys, CompareKeys)
	return keys
}

// Targets returns the keys referrer references, in the order they were
// set.
func (ix *Index) Targets(referrer Key) []Key {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return slices.Clone(ix.targets[referrer])
}

// CompareKeys orders keys by kind, then name.
func CompareKeys(a, b Key) int {
	if c := cmp.Compare(a.Kind, b.Kind); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}
