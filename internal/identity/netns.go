package identity

import "strconv"

// NetNS names a network namespace by the device and inode of its nsfs
// file, which are its own for as long as it lives. The zero NetNS is
// none known.
type NetNS struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

// IsZero reports whether n names no namespace.
func (n NetNS) IsZero() bool { return n == NetNS{} }

// String is n as /proc/<pid>/ns/net links name it: net:[INODE].
func (n NetNS) String() string { return "net:[" + strconv.FormatUint(n.Ino, 10) + "]" }
