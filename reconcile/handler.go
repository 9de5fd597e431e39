package reconcile

import (
	"sync"
	"sync/atomic"
)

// Handler is told the key of an object that changed. Stores call their
// handlers synchronously, after the change is visible to Get, from the
// goroutine that made the change: a handler must be cheap and must not
// block (enqueueing a key is the intended work).
type Handler func(Key)

// Enqueuer accepts keys to reconcile. *Controller implements it.
type Enqueuer interface {
	Enqueue(Key)
}

// MapFunc maps the key of a changed object to the keys that must be
// reconciled because of it, such as a Profile to the Workspaces that
// reference it. Index.Referrers is one.
type MapFunc func(Key) []Key

// EnqueueKey returns a Handler that enqueues the changed key itself.
func EnqueueKey(q Enqueuer) Handler {
	return q.Enqueue
}

// EnqueueMapped returns a Handler that enqueues every key m maps the
// changed key to. Its cost is that of m plus one Enqueue per mapped key.
func EnqueueMapped(q Enqueuer, m MapFunc) Handler {
	return func(k Key) {
		for _, mk := range m(k) {
			q.Enqueue(mk)
		}
	}
}

// ForKind returns a Handler that passes only keys of the given kind to h.
func ForKind(kind string, h Handler) Handler {
	return func(k Key) {
		if k.Kind == kind {
			h(k)
		}
	}
}

// notifier keeps a store's handlers. Registration copies the list, so a
// notification reads it with one atomic load and no lock.
type notifier struct {
	// mu serialises registration and removal; notify does not take it.
	mu       sync.Mutex
	nextID   uint64
	handlers atomic.Pointer[[]registered]
}

type registered struct {
	id uint64
	h  Handler
}

// add registers h and returns the function that removes it.
func (n *notifier) add(h Handler) (remove func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.nextID++
	id := n.nextID
	var old []registered
	if p := n.handlers.Load(); p != nil {
		old = *p
	}
	hs := make([]registered, len(old), len(old)+1)
	copy(hs, old)
	hs = append(hs, registered{id: id, h: h})
	n.handlers.Store(&hs)
	return func() { n.remove(id) }
}

func (n *notifier) remove(id uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	p := n.handlers.Load()
	if p == nil {
		return
	}
	hs := make([]registered, 0, len(*p))
	for _, r := range *p {
		if r.id != id {
			hs = append(hs, r)
		}
	}
	n.handlers.Store(&hs)
}

// notify calls every handler with k, in registration order.
func (n *notifier) notify(k Key) {
	p := n.handlers.Load()
	if p == nil {
		return
	}
	for _, r := range *p {
		r.h(k)
	}
}
