package bridge

import (
	"context"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// UntilExit returns a context that ends when the process pidfd names
// exits, or when ctx ends. It owns pidfd; the goroutine that waits ends
// with the returned cancel, which closes pidfd.
func UntilExit(ctx context.Context, pidfd int) (context.Context, context.CancelFunc, error) {
	// Non-blocking, the pidfd is registered with the poller, so that the
	// wait parks no thread.
	if err := unix.SetNonblock(pidfd, true); err != nil {
		unix.Close(pidfd)
		return nil, nil, fmt.Errorf("bridge: the agent's pidfd: %w", err)
	}
	f := os.NewFile(uintptr(pidfd), "pidfd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("bridge: the agent's pidfd: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer cancel()
		stop := context.AfterFunc(ctx, func() { f.SetReadDeadline(time.Unix(1, 0)) })
		defer stop()
		rc.Read(func(fd uintptr) bool { return exited(int(fd)) })
	}()
	return ctx, func() {
		cancel()
		<-done
		f.Close()
	}, nil
}

// exited reports whether the process of pidfd fd has exited: the pidfd
// is readable then.
func exited(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err != nil || n > 0
}
