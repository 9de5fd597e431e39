package apiserver

import (
	"slices"
	"sync"
)

// changeLogKeep is how many changes a ChangeLog keeps: a watch that falls
// further behind lists the whole kind again.
const changeLogKeep = 4096

// ChangeLog numbers the changes to the objects of one kind and keeps the
// names of the latest, so that a watch sends only what changed: what a
// Daemon's Changed answers from. Its methods may be called from many
// goroutines at once.
type ChangeLog struct {
	// mu guards the fields that follow.
	mu    sync.Mutex
	last  uint64   // the number of the latest change; 0 before any
	names []string // names[i] changed in change last-len(names)+1+i
	next  chan struct{}
}

// NewChangeLog returns a log of no changes.
func NewChangeLog() *ChangeLog { return &ChangeLog{next: make(chan struct{})} }

// Note records a change to the object called name.
func (l *ChangeLog) Note(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last++
	l.names = append(l.names, name)
	if len(l.names) > 2*changeLogKeep {
		l.names = slices.Delete(l.names, 0, len(l.names)-changeLogKeep)
	}
	close(l.next)
	l.next = make(chan struct{})
}

// Since returns the names, sorted and each once, of the objects changed
// after change number after, the number of the latest change, and a
// channel closed at the next. known is false when those changes are no
// longer kept.
func (l *ChangeLog) Since(after uint64) (names []string, last uint64, next <-chan struct{}, known bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	kept := uint64(len(l.names))
	if after > l.last || l.last-after > kept {
		return nil, l.last, l.next, false
	}
	names = slices.Clone(l.names[kept-(l.last-after):])
	slices.Sort(names)
	return slices.Compact(names), l.last, l.next, true
}
