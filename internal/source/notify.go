package source

// op says what happened to a path, as the kernel reports it.
type op uint16

const (
	opCreate     op = 1 << iota // created in the directory, not by a rename
	opMovedIn                   // renamed into the directory: complete
	opWrite                     // written; more writes may follow
	opCloseWrite                // closed after being opened for writing
	opRemove                    // removed
	opMovedOut                  // renamed away, or the watched directory itself moved
	opChmod                     // attributes changed
	opIsDir                     // the path is a directory
)

func (o op) has(any op) bool { return o&any != 0 }

// fsEvent is one event about path.
type fsEvent struct {
	path string
	op   op
}

// notifier watches directories, not recursively. Its errors are lost
// events (a queue overflow): only a relist can tell what changed.
type notifier interface {
	add(dir string) error
	remove(dir string)
	events() <-chan fsEvent
	errors() <-chan error
	close()
}
