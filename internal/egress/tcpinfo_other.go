//go:build !linux

package egress

import (
	"net"
	"time"
)

func quietFor(net.Conn) (time.Duration, bool) { return 0, false }
