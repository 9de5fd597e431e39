package peer

import (
	"encoding/binary"
	"errors"
	"path"
	"sync"

	"golang.org/x/sys/unix"
)

// maxCgroupIDs bounds the ids a cgroupIndex remembers; past it, it starts
// over.
const maxCgroupIDs = 16384

// maxWalkedGroups bounds one walk of the cgroup2 tree.
const maxWalkedGroups = 100000

// cgroupIndex maps cgroup2 ids (a group directory's inode number, which a
// TCP socket carries) to the group's path, relative to the cgroup2 mount.
//
// A group's id is unique for the life of the system and a group never
// changes parent, so an id, once found, keeps naming the same group and
// the same ancestors: the index remembers what it found, and finds an
// id it does not know by looking first at the groups the caller names
// (the scopes marshald launched, where agents' sockets come from), then
// below them, then everywhere.
type cgroupIndex struct {
	mount string

	// finding serialises the lookups of unknown ids; it is taken before
	// mu.
	finding sync.Mutex
	// mu guards byID.
	mu sync.RWMutex
	// byID maps an id to its group's path, "" for an id found nowhere (a
	// removed group, or one outside this cgroup namespace).
	byID map[uint64]string
}

func newCgroupIndex(mount string) *cgroupIndex {
	return &cgroupIndex{mount: mount, byID: map[uint64]string{}}
}

// path returns the path of group id, and false when no group of the tree
// has it. hints are groups to look at first.
func (x *cgroupIndex) path(id uint64, hints func() []string) (string, bool) {
	if p, ok := x.known(id); ok {
		return p, p != ""
	}
	x.finding.Lock()
	defer x.finding.Unlock()
	if p, ok := x.known(id); ok {
		return p, p != "" // found while this lookup waited
	}
	found := map[uint64]string{}
	p := x.find(id, hints(), found)
	found[id] = p
	x.mu.Lock()
	if len(x.byID)+len(found) > maxCgroupIDs {
		clear(x.byID)
	}
	for k, v := range found {
		x.byID[k] = v
	}
	x.mu.Unlock()
	return p, p != ""
}

func (x *cgroupIndex) known(id uint64) (string, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	p, ok := x.byID[id]
	return p, ok
}

// find looks for group id: the hints and the root themselves, then below
// each hint, then the whole tree. It notes in found the id of every hint
// on the way.
func (x *cgroupIndex) find(id uint64, hints []string, found map[uint64]string) string {
	for _, h := range append(hints, "/") {
		var st unix.Stat_t
		if unix.Stat(x.mount+h, &st) != nil {
			continue
		}
		found[st.Ino] = h
		if st.Ino == id {
			return h
		}
	}
	budget := maxWalkedGroups
	for _, h := range hints {
		if p := x.walk(h, id, &budget); p != "" {
			return p
		}
	}
	return x.walk("/", id, &budget)
}

// walk looks for group id below dir, depth first, reading directory
// entries for their inode numbers, so that a group costs no stat. It
// gives up when budget groups were read.
func (x *cgroupIndex) walk(dir string, id uint64, budget *int) string {
	if *budget <= 0 {
		return ""
	}
	*budget--
	fd, err := unix.Open(x.mount+dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	var subdirs []string
	found := ""
	readDirents(fd, func(ino uint64, typ byte, name []byte) bool {
		if typ != unix.DT_DIR {
			return true
		}
		child := path.Join(dir, string(name))
		if ino == id {
			found = child
			return false
		}
		subdirs = append(subdirs, child)
		return true
	})
	unix.Close(fd)
	if found != "" {
		return found
	}
	for _, s := range subdirs {
		if p := x.walk(s, id, budget); p != "" {
			return p
		}
	}
	return ""
}

// readDirents calls fn with each entry of the directory open at fd, but
// "." and "..": its inode number, type and name (valid during the call),
// until fn returns false or the directory ends.
func readDirents(fd int, fn func(ino uint64, typ byte, name []byte) bool) {
	var buf [8192]byte
	for {
		n, err := unix.Getdents(fd, buf[:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n <= 0 {
			return
		}
		for b := buf[:n]; len(b) >= 19; {
			// struct linux_dirent64: d_ino, d_off, d_reclen, d_type, d_name.
			ino := binary.NativeEndian.Uint64(b[0:])
			reclen := int(binary.NativeEndian.Uint16(b[16:]))
			if reclen < 19 || reclen > len(b) {
				break
			}
			typ, name := b[18], b[19:reclen]
			if i := indexNUL(name); i >= 0 {
				name = name[:i]
			}
			b = b[reclen:]
			if string(name) == "." || string(name) == ".." {
				continue
			}
			if !fn(ino, typ, name) {
				return
			}
		}
	}
}

func indexNUL(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return -1
}
