//go:build !linux

package cgroup

import (
	"context"
	"fmt"
)

// WatchTree reports what happens to the marshal scopes below dir. It needs
// Linux; elsewhere it returns an error wrapping ErrUnavailable.
func WatchTree(ctx context.Context, mount, dir string, fn func(Event)) error {
	return fmt.Errorf("watching %s: cgroups need Linux: %w", dir, ErrUnavailable)
}

// WaitEvents blocks until cond holds for the cgroup.events of group dir. It
// needs Linux; elsewhere it returns an error wrapping ErrUnavailable.
func WaitEvents(ctx context.Context, dir string, cond func(GroupEvents) bool) (GroupEvents, error) {
	return GroupEvents{}, fmt.Errorf("watching %s: cgroups need Linux: %w", dir, ErrUnavailable)
}
