package peer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"golang.org/x/sys/unix"
)

// Constants of the kernel's socket diagnostics (linux/sock_diag.h,
// linux/inet_diag.h) that x/sys/unix does not name.
const (
	sockDiagByFamily = 20 // SOCK_DIAG_BY_FAMILY
	inetDiagCgroupID = 21 // INET_DIAG_CGROUP_ID
	inetDiagNoCookie = 0xffffffff

	nlmsgHdrLen     = 16
	inetDiagReqLen  = 56 // struct inet_diag_req_v2
	inetDiagMsgLen  = 72 // struct inet_diag_msg
	inetDiagInodeAt = 68 // idiag_inode in struct inet_diag_msg
)

// tcpSocket is what the kernel says about one TCP socket.
type tcpSocket struct {
	// cgroupID is the cgroup2 group the socket was created in: the inode
	// number of that group's directory.
	cgroupID uint64
	// inode is the socket's inode, as /proc/<pid>/fd shows it.
	inode uint32
	// state is the TCP state (tcpEstablished, …).
	state uint8
}

// TCP states of interest (include/net/tcp_states.h).
const (
	tcpEstablished = 1
	tcpCloseWait   = 8
)

// open reports whether a process may still hold the socket: it has not
// closed it, as a socket in FIN_WAIT or TIME_WAIT has.
func (s tcpSocket) open() bool { return s.state == tcpEstablished || s.state == tcpCloseWait }

// errNoSocket is returned when the kernel knows no socket of that
// address pair: the peer closed it (a socket in TIME_WAIT has no cgroup).
var errNoSocket = errors.New("no such socket")

// sockDiag asks the kernel about single TCP sockets by their address pair
// (an exact lookup in the connection hash, not a dump of every socket).
// It keeps a few netlink sockets, so lookups run in parallel without
// opening a socket each.
type sockDiag struct {
	// mu guards free and closed.
	mu     sync.Mutex
	free   []int
	closed bool
}

// maxIdleDiagSockets bounds the netlink sockets kept between lookups.
const maxIdleDiagSockets = 8

// lookup returns the socket whose local address is local and whose
// remote address is remote.
func (d *sockDiag) lookup(local, remote netip.AddrPort) (tcpSocket, error) {
	fd, err := d.get()
	if err != nil {
		return tcpSocket{}, err
	}
	s, err := query(fd, local, remote)
	d.put(fd, err)
	return s, err
}

func (d *sockDiag) get() (int, error) {
	d.mu.Lock()
	if n := len(d.free); n > 0 {
		fd := d.free[n-1]
		d.free = d.free[:n-1]
		d.mu.Unlock()
		return fd, nil
	}
	d.mu.Unlock()
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return -1, fmt.Errorf("socket diagnostics: %w", err)
	}
	return fd, nil
}

// put keeps fd for the next lookup, unless its last use failed in a way
// that may leave an answer unread in it.
func (d *sockDiag) put(fd int, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || len(d.free) >= maxIdleDiagSockets || err != nil && !errors.Is(err, errNoSocket) {
		unix.Close(fd)
		return
	}
	d.free = append(d.free, fd)
}

func (d *sockDiag) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, fd := range d.free {
		unix.Close(fd)
	}
	d.free, d.closed = nil, true
}

// query sends one SOCK_DIAG_BY_FAMILY request for the TCP socket
// local→remote and reads its answer.
func query(fd int, local, remote netip.AddrPort) (tcpSocket, error) {
	var req [nlmsgHdrLen + inetDiagReqLen]byte
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], sockDiagByFamily)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST)
	r := req[nlmsgHdrLen:]
	family := byte(unix.AF_INET6)
	if local.Addr().Is4() {
		family = unix.AF_INET
	}
	r[0], r[1] = family, unix.IPPROTO_TCP
	ne.PutUint32(r[4:], 0xffffffff) // every state
	binary.BigEndian.PutUint16(r[8:], local.Port())
	binary.BigEndian.PutUint16(r[10:], remote.Port())
	putAddr(r[12:28], local.Addr())
	putAddr(r[28:44], remote.Addr())
	ne.PutUint32(r[48:], inetDiagNoCookie)
	ne.PutUint32(r[52:], inetDiagNoCookie)
	for {
		err := unix.Sendto(fd, req[:], 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return tcpSocket{}, fmt.Errorf("socket diagnostics: %w", err)
		}
		break
	}
	var buf [1024]byte
	for {
		n, _, err := unix.Recvfrom(fd, buf[:], 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return tcpSocket{}, fmt.Errorf("socket diagnostics: %w", err)
		}
		return parseAnswer(buf[:n])
	}
}

// putAddr writes a into an idiag_src or idiag_dst field: four bytes for
// IPv4, sixteen for IPv6.
func putAddr(dst []byte, a netip.Addr) {
	if a.Is4() {
		b := a.As4()
		copy(dst, b[:])
		return
	}
	b := a.As16()
	copy(dst, b[:])
}

// parseAnswer reads the answer to one exact request: an inet_diag_msg
// with its attributes, or an error message.
func parseAnswer(b []byte) (tcpSocket, error) {
	ne := binary.NativeEndian
	if len(b) < nlmsgHdrLen {
		return tcpSocket{}, fmt.Errorf("socket diagnostics: short answer of %d bytes", len(b))
	}
	size := int(ne.Uint32(b[0:]))
	if size < nlmsgHdrLen || size > len(b) {
		return tcpSocket{}, fmt.Errorf("socket diagnostics: answer of %d bytes says %d", len(b), size)
	}
	b = b[:size]
	switch ne.Uint16(b[4:]) {
	case unix.NLMSG_ERROR:
		if len(b) < nlmsgHdrLen+4 {
			return tcpSocket{}, errors.New("socket diagnostics: short error answer")
		}
		errno := unix.Errno(-int32(ne.Uint32(b[nlmsgHdrLen:])))
		if errno == unix.ENOENT {
			return tcpSocket{}, errNoSocket
		}
		return tcpSocket{}, fmt.Errorf("socket diagnostics: %w", errno)
	case sockDiagByFamily:
	default:
		return tcpSocket{}, fmt.Errorf("socket diagnostics: answer of type %d", ne.Uint16(b[4:]))
	}
	msg := b[nlmsgHdrLen:]
	if len(msg) < inetDiagMsgLen {
		return tcpSocket{}, fmt.Errorf("socket diagnostics: short message of %d bytes", len(msg))
	}
	s := tcpSocket{inode: ne.Uint32(msg[inetDiagInodeAt:]), state: msg[1]}
	for attrs := msg[inetDiagMsgLen:]; len(attrs) >= 4; {
		l := int(ne.Uint16(attrs[0:]))
		if l < 4 || l > len(attrs) {
			break
		}
		if ne.Uint16(attrs[2:]) == inetDiagCgroupID && l >= 12 {
			s.cgroupID = ne.Uint64(attrs[4:])
			return s, nil
		}
		attrs = attrs[min((l+3)&^3, len(attrs)):]
	}
	// A socket in TIME_WAIT, or a kernel before 5.9, names no cgroup.
	return tcpSocket{}, errNoSocket
}
