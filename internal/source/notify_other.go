//go:build !linux

package source

import "github.com/fsnotify/fsnotify"

// fsnotifier is a notifier on fsnotify. It cannot tell a rename into a
// directory from a new file nor see a writer close its file, so every
// change waits for the directory to be quiet.
type fsnotifier struct {
	w    *fsnotify.Watcher
	out  chan fsEvent
	stop chan struct{}
	done chan struct{}
}

func newNotifier(buffer int) (notifier, error) {
	w, err := fsnotify.NewBufferedWatcher(uint(buffer))
	if err != nil {
		return nil, err
	}
	n := &fsnotifier{w: w, out: make(chan fsEvent, buffer), stop: make(chan struct{}), done: make(chan struct{})}
	go n.read()
	return n, nil
}

func (n *fsnotifier) add(dir string) error   { return n.w.Add(dir) }
func (n *fsnotifier) remove(dir string)      { n.w.Remove(dir) }
func (n *fsnotifier) events() <-chan fsEvent { return n.out }
func (n *fsnotifier) errors() <-chan error   { return n.w.Errors }

func (n *fsnotifier) close() {
	close(n.stop)
	n.w.Close()
	<-n.done
}

func (n *fsnotifier) read() {
	defer close(n.done)
	defer close(n.out)
	for ev := range n.w.Events {
		var o op
		for _, m := range [...]struct {
			from fsnotify.Op
			to   op
		}{
			{fsnotify.Create, opCreate}, {fsnotify.Write, opWrite}, {fsnotify.Remove, opRemove},
			{fsnotify.Rename, opMovedOut}, {fsnotify.Chmod, opChmod},
		} {
			if ev.Has(m.from) {
				o |= m.to
			}
		}
		select {
		case n.out <- fsEvent{path: ev.Name, op: o}:
		case <-n.stop:
			return
		}
	}
}
