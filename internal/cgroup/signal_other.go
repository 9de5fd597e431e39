//go:build !linux

package cgroup

import (
	"context"
	"errors"
	"syscall"
)

// SignalTree: cgroup trees are Linux's.
func SignalTree(ctx context.Context, fsys FS, dir string, sig syscall.Signal) error {
	return errors.ErrUnsupported
}
