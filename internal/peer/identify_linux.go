package peer

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/marshal-dev/marshal/internal/identity"
)

// Identifier finds the peer of an accepted connection.
type Identifier struct {
	mount    string
	diag     sockDiag
	cgroups  *cgroupIndex
	launches Launches
	// self is the proxy's network namespace, which its TCP listeners are
	// in and so every TCP peer.
	self identity.NetNS
}

// NewIdentifier returns an Identifier of peers whose cgroup2 hierarchy
// is mounted at mount, of the launches marshald recorded, whose TCP
// listeners are in network namespace self.
func NewIdentifier(mount string, launches Launches, self identity.NetNS) *Identifier {
	return &Identifier{mount: mount, cgroups: newCgroupIndex(mount), launches: launches, self: self}
}

// Close releases the socket diagnostics' netlink sockets.
func (x *Identifier) Close() { x.diag.close() }

// ForgetGroups forgets where the groups it found are, as a new
// Identifier would not know: the next peer of each is looked for again.
func (x *Identifier) ForgetGroups() { x.cgroups = newCgroupIndex(x.mount) }

// Identify returns the peer of c and who it is. An error means c's peer
// could not be looked at (c is neither TCP nor unix); a peer the kernel
// knows nothing of is UnscopedUnknown.
func (x *Identifier) Identify(c net.Conn) (*Peer, Who, error) {
	switch c := c.(type) {
	case *net.TCPConn:
		p := x.tcpPeer(c)
		return p, Attribute(p, x.launches), nil
	case *net.UnixConn:
		return x.unixPeer(c)
	}
	return nil, Who{}, fmt.Errorf("%T: %w", c, ErrUnsupportedListener)
}

// tcpPeer asks the kernel which group the peer's socket was made in and
// where that group is.
func (x *Identifier) tcpPeer(c *net.TCPConn) *Peer {
	p := &Peer{Transport: TransportTCP, NetNS: x.self}
	// The peer's socket is the one whose local address is our remote.
	local, remote := addrPort(c.RemoteAddr()), addrPort(c.LocalAddr())
	s, err := x.diag.lookup(local, remote)
	if err != nil {
		return p
	}
	p.CgroupID, p.sockInode, p.local, p.remote = s.cgroupID, s.inode, local, remote
	p.Cgroup, _ = x.cgroups.path(s.cgroupID, x.scopePaths)
	return p
}

// unixPeer asks the kernel which group the peer process is in: by its
// id, found as a TCP peer's is, where the kernel names it (Linux 6.13),
// else read from /proc.
func (x *Identifier) unixPeer(c *net.UnixConn) (*Peer, Who, error) {
	p := &Peer{Transport: TransportUnix}
	cred, gid, ns, err := groupOf(c)
	var id identity.Identity
	byID := !errors.Is(err, errors.ErrUnsupported)
	if !byID {
		cred, id, ns, err = namespaceOf(c)
	}
	p.NetNS = ns
	p.PID, p.UID, p.GID, p.HasUID = cred.PID, cred.UID, cred.GID, err == nil || cred.UID != 0 || cred.PID != 0
	switch {
	case err == nil && byID:
		p.CgroupID = gid
		p.Cgroup, _ = x.cgroups.path(gid, x.scopePaths)
	case err == nil && id.Hierarchy == identity.Unified:
		p.Cgroup = id.Path
	case err == nil:
		// A scope found in systemd's v1 hierarchy only: its cgroup2 path
		// is not known, and launches record those.
	case errors.Is(err, identity.ErrNotManaged):
		return p, Who{Unscoped: UnscopedNone}, nil
	default:
		return p, Who{Unscoped: UnscopedUnknown}, nil
	}
	return p, Attribute(p, x.launches), nil
}

// Owner returns a process of the peer's group that holds its TCP socket,
// or 0. A socket its process has closed is not looked for: no fd holds
// it any more.
func (x *Identifier) Owner(p *Peer) int {
	if p.Transport != TransportTCP || p.sockInode == 0 {
		return 0
	}
	if s, err := x.diag.lookup(p.local, p.remote); err != nil || s.inode != p.sockInode || !s.open() {
		return 0
	}
	return socketOwner(x.mount, p.Cgroup, p.sockInode)
}

// scopePaths lists the scopes of live launches, where the groups of
// agents' sockets are.
func (x *Identifier) scopePaths() []string {
	ls := x.launches.Launches()
	paths := make([]string, 0, len(ls))
	for _, l := range ls {
		if l.Path != "" {
			paths = append(paths, l.Path)
		}
	}
	return paths
}

func addrPort(a net.Addr) netip.AddrPort {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.AddrPort()
	}
	return netip.AddrPort{}
}

// maxOwnerProcs and maxOwnerFDs bound the search for a socket's owner.
const (
	maxOwnerProcs = 256
	maxOwnerFDs   = 1 << 16
)

// socketOwner returns a process of group cgroup (a path relative to the
// cgroup2 mount) that holds the socket of inode, or 0. The newest
// processes are looked at first: the one that connected is most often a
// tool the agent just started. Each process's fd directory is read
// through one descriptor, its links read relative to it.
func socketOwner(mount, cgroup string, inode uint32) int {
	if cgroup == "" || inode == 0 {
		return 0
	}
	data, err := os.ReadFile(mount + cgroup + "/cgroup.procs")
	if err != nil {
		return 0
	}
	var pids []int
	for f := range strings.FieldsSeq(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	want := "socket:[" + strconv.FormatUint(uint64(inode), 10) + "]"
	budget := maxOwnerFDs
	for i := len(pids) - 1; i >= 0 && len(pids)-i <= maxOwnerProcs && budget > 0; i-- {
		if holds(pids[i], want, &budget) {
			return pids[i]
		}
	}
	return 0
}

// holds reports whether process pid has an fd whose link is want,
// reading at most budget links.
func holds(pid int, want string, budget *int) bool {
	dfd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(dfd)
	var link [64]byte
	found := false
	readDirents(dfd, func(_ uint64, _ byte, name []byte) bool {
		if *budget--; *budget < 0 {
			return false
		}
		l, err := unix.Readlinkat(dfd, string(name), link[:])
		found = err == nil && string(link[:l]) == want
		return !found
	})
	return found
}
