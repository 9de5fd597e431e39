package egress

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// quietFor returns how long the TCP connection c has carried no data
// either way, from the kernel's TCP_INFO; false when c is not TCP or
// the kernel cannot say.
func quietFor(c net.Conn) (time.Duration, bool) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return 0, false
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var info *unix.TCPInfo
	var ierr error
	if err := raw.Control(func(fd uintptr) {
		info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || ierr != nil {
		return 0, false
	}
	ms := min(info.Last_data_sent, info.Last_data_recv)
	return time.Duration(ms) * time.Millisecond, true
}
