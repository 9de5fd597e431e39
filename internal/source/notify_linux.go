package source

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// inotify is a notifier on Linux's inotify. It is written here rather
// than taken from fsnotify because a complete in-place write is known by
// IN_CLOSE_WRITE, which fsnotify v1.10 keeps unexported.
type inotify struct {
	file *os.File
	fd   int
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
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	n := &inotify{
		// Non-blocking, so reads wait in the runtime's poller and close
		// ends them.
		file: os.NewFile(uintptr(fd), "inotify"),
		fd:   fd,
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

func (n *inotify) events() <-chan fsEvent { return n.out }
func (n *inotify) errors() <-chan error   { return n.errs }

// add watches dir; adding a directory again renews its watch.
func (n *inotify) add(dir string) error {
	wd, err := unix.InotifyAddWatch(n.fd, dir, inotifyMask)
	if err != nil {
		return &os.PathError{Op: "inotify_add_watch", Path: dir, Err: err}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if old, ok := n.wds[dir]; ok && old != int32(wd) {
		delete(n.dirs, old)
	}
	n.dirs[int32(wd)] = dir
	n.wds[dir] = int32(wd)
	return nil
}

func (n *inotify) remove(dir string) {
	n.mu.Lock()
	wd, ok := n.wds[dir]
	delete(n.wds, dir)
	delete(n.dirs, wd)
	n.mu.Unlock()
	if ok {
		unix.InotifyRmWatch(n.fd, uint32(wd)) // EINVAL: the kernel dropped it already
	}
}

func (n *inotify) close() {
	close(n.stop)
	n.file.Close()
	<-n.done
}

// read sends the kernel's events until close; events() is closed when it
// ends, so that the loop knows no more will come.
func (n *inotify) read() {
	defer close(n.done)
	defer close(n.out)
	var buf [64 * 1024]byte
	for {
		k, err := n.file.Read(buf[:])
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				n.lost(fmt.Errorf("reading inotify events: %w", err))
			}
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= k; {
			raw := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			end := off + unix.SizeofInotifyEvent + int(raw.Len)
			if end > k {
				n.lost(errors.New("inotify: a short read"))
				break
			}
			name := buf[off+unix.SizeofInotifyEvent : end]
			off = end
			ev, ok := n.event(raw.Wd, raw.Mask, name)
			if !ok {
				continue
			}
			select {
			case n.out <- ev:
			case <-n.stop:
				return
			}
		}
	}
}

// event names one kernel event; false when there is nothing to tell.
func (n *inotify) event(wd int32, mask uint32, name []byte) (fsEvent, bool) {
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
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	if len(name) > 0 {
		ev.path = dir + "/" + string(name)
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
func (n *inotify) lost(err error) {
	select {
	case n.errs <- err:
	default:
	}
}
