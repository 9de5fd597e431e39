package cgroup

import (
	"encoding/binary"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/internal/inotify"
)

// TreeWatcherForTest drives the watcher behind WatchTree one step at a
// time, without its read loop, so that a test can reach paths the kernel
// cannot be made to take on demand, such as a queue overflow.
type TreeWatcherForTest struct{ w *treeWatcher }

// NewTreeWatcherForTest starts watching dir like WatchTree, without the
// initial relist.
func NewTreeWatcherForTest(mount, dir string, fn func(Event)) (*TreeWatcherForTest, error) {
	w, err := newTreeWatcher(mount, dir, fn)
	if err != nil {
		return nil, err
	}
	return &TreeWatcherForTest{w: w}, nil
}

// Relist runs the relist WatchTree starts with.
func (t *TreeWatcherForTest) Relist() error { return t.w.relist(true) }

// Overflow feeds the watcher an IN_Q_OVERFLOW record, encoded as the
// kernel sends it, through the same decoder and handler as real events.
func (t *TreeWatcherForTest) Overflow() error {
	buf := make([]byte, unix.SizeofInotifyEvent)
	binary.NativeEndian.PutUint32(buf[0:4], ^uint32(0)) // wd -1
	binary.NativeEndian.PutUint32(buf[4:8], unix.IN_Q_OVERFLOW)
	return inotify.Decode(buf, t.w.handle)
}

// Close stops watching.
func (t *TreeWatcherForTest) Close() { t.w.close() }
