package hostaddr

import (
	"net/netip"
	"sync"
	"sync/atomic"
)

// Set is the addresses of one network namespace's interfaces. Has is safe
// for concurrent use with Run.
type Set struct {
	addrs atomic.Pointer[map[netip.Addr]struct{}]

	// mu guards changed.
	mu sync.Mutex
	// changed is closed, and replaced, at each change of the set.
	changed chan struct{}

	watcher
}

func newSet() *Set {
	s := &Set{changed: make(chan struct{})}
	s.addrs.Store(&map[netip.Addr]struct{}{})
	return s
}

// Has reports whether a, unmapped and without zone, is an address of an
// interface.
func (s *Set) Has(a netip.Addr) bool {
	_, ok := (*s.addrs.Load())[a.Unmap().WithZone("")]
	return ok
}

// Len returns the number of addresses in the set.
func (s *Set) Len() int { return len(*s.addrs.Load()) }

// Changed returns a channel closed at the next change of the set: read it
// before Has to wait for an address without missing it.
func (s *Set) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// replace makes addrs the set; the map is not written after.
func (s *Set) replace(addrs map[netip.Addr]struct{}) {
	s.addrs.Store(&addrs)
	s.notify()
}

// update adds or removes one address. It is called by one goroutine at a
// time, Run's.
func (s *Set) update(a netip.Addr, present bool) {
	a = a.Unmap().WithZone("")
	old := *s.addrs.Load()
	if _, ok := old[a]; ok == present {
		return
	}
	next := make(map[netip.Addr]struct{}, len(old)+1)
	for k := range old {
		next[k] = struct{}{}
	}
	if present {
		next[a] = struct{}{}
	} else {
		delete(next, a)
	}
	s.replace(next)
}

func (s *Set) notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.changed)
	s.changed = make(chan struct{})
}
