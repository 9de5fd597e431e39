package source

import (
	"errors"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/internal/inotify"
)

// inotifyNotifier is a notifier on Linux's inotify, read through package
// inotify rather than fsnotify because a complete in-place write is known
// by IN_CLOSE_WRITE, which fsnotify v1.10 keeps unexported.
type inotifyNotifier struct {
	in   *inotify.File
	out  chan fsEvent
	errs chan error
	stop chan struct{}
	done chan struct{}

	// mu guards the watches: the reader names events by them, the loop
	// adds and removes them.
	mu   sync.Mutex
	dirs map[int32]string // watch descriptor → directory
	wds  map[string]int32
}

const inotifyMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_MODIFY | unix.IN_CLOSE_WRITE |
	unix.IN_DELETE | unix.IN_DELETE_SELF | unix.IN_MOVED_FROM | unix.IN_MOVE_SELF |
	unix.IN_ATTRIB | unix.IN_ONLYDIR

func newNotifier(buffer int) (notifier, error) {
	in, err := inotify.Open()
	if err != nil {
		return nil, err
	}
	n := &inotifyNotifier{
		in:   in,
		out:  make(chan fsEvent, buffer),
		errs: make(chan error, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
		dirs: map[int32]string{},
		wds:  map[string]int32{},
	}
	go n.read()
	return n, nil
}

func (n *inotifyNotifier) events() <-chan fsEvent { return n.out }
func (n *inotifyNotifier) errors() <-chan error   { return n.errs }

// add watches dir; adding a directory again renews its watch.
func (n *inotifyNotifier) add(dir string) error {
	wd, err := n.in.Add(dir, inotifyMask)
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if old, ok := n.wds[dir]; ok && old != wd {
		delete(n.dirs, old)
	}
	n.dirs[wd] = dir
	n.wds[dir] = wd
	return nil
}

func (n *inotifyNotifier) remove(dir string) {
	n.mu.Lock()
	wd, ok := n.wds[dir]
	delete(n.wds, dir)
	delete(n.dirs, wd)
	n.mu.Unlock()
	if ok {
		n.in.Remove(wd)
	}
}

func (n *inotifyNotifier) close() {
	close(n.stop)
	n.in.Close()
	<-n.done
}

// errStopped ends the decoding of a read once close was asked for.
var errStopped = errors.New("notifier stopped")

// read sends the kernel's events until close; events() is closed when it
// ends, so that the loop knows no more will come.
func (n *inotifyNotifier) read() {
	defer close(n.done)
	defer close(n.out)
	buf := make([]byte, inotify.BufferSize)
	for {
		k, err := n.in.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				n.lost(err)
			}
			return
		}
		err = inotify.Decode(buf[:k], func(raw inotify.Event) error {
			ev, ok := n.event(raw.WD, raw.Mask, raw.Name)
			if !ok {
				return nil
			}
			select {
			case n.out <- ev:
				return nil
			case <-n.stop:
				return errStopped
			}
		})
		switch {
		case errors.Is(err, errStopped):
			return
		case err != nil:
			n.lost(err)
		}
	}
}

// event names one kernel event; false when there is nothing to tell.
func (n *inotifyNotifier) event(wd int32, mask uint32, name string) (fsEvent, bool) {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		n.lost(errors.New("inotify queue overflow"))
		return fsEvent{}, false
	}
	n.mu.Lock()
	dir, ok := n.dirs[wd]
	if mask&unix.IN_IGNORED != 0 && ok {
		// The watch is gone: removed, or its directory deleted.
		delete(n.dirs, wd)
		if n.wds[dir] == wd {
			delete(n.wds, dir)
		}
	}
	n.mu.Unlock()
	if !ok || mask&unix.IN_IGNORED != 0 {
		return fsEvent{}, false
	}
	ev := fsEvent{path: dir}
	if name != "" {
		ev.path = dir + "/" + name
	}
	for _, m := range [...]struct {
		mask uint32
		op   op
	}{
		{unix.IN_CREATE, opCreate}, {unix.IN_MOVED_TO, opMovedIn}, {unix.IN_MODIFY, opWrite},
		{unix.IN_CLOSE_WRITE, opCloseWrite}, {unix.IN_DELETE | unix.IN_DELETE_SELF, opRemove},
		{unix.IN_MOVED_FROM | unix.IN_MOVE_SELF, opMovedOut}, {unix.IN_ATTRIB, opChmod}, {unix.IN_ISDIR, opIsDir},
	} {
		if mask&m.mask != 0 {
			ev.op |= m.op
		}
	}
	return ev, true
}

// lost reports lost events once; one pending report covers many.
func (n *inotifyNotifier) lost(err error) {
	select {
	case n.errs <- err:
	default:
	}
}
