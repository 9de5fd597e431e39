//go:build !linux

package cgroupfs

import (
	"context"
	"fmt"

	"github.com/marshal-dev/marshal/internal/cgroup"
)

var errNotLinux = fmt.Errorf("cgroupfs: cgroups need Linux: %w", cgroup.ErrUnavailable)

// New fails: cgroups need Linux. The error wraps cgroup.ErrUnavailable.
func New(opts Options) (*Backend, error) {
	if _, err := cleanRoot(opts.Root); err != nil {
		return nil, err
	}
	return nil, errNotLinux
}

func (b *Backend) Probe(context.Context) (cgroup.Capabilities, error) { return nil, errNotLinux }

func (b *Backend) EnsureSlice(context.Context, string, cgroup.Limits) (cgroup.Applied, error) {
	return cgroup.Applied{}, errNotLinux
}

func (b *Backend) RemoveSlice(context.Context, string) error { return errNotLinux }

func (b *Backend) CreateScope(context.Context, string, string, int, cgroup.Limits) (cgroup.Scope, cgroup.Applied, error) {
	return cgroup.Scope{}, cgroup.Applied{}, errNotLinux
}

func (b *Backend) ScopeLimits(context.Context, cgroup.Scope) (cgroup.Applied, error) {
	return cgroup.Applied{}, errNotLinux
}

func (b *Backend) ListScopes(context.Context) ([]cgroup.Scope, error) { return nil, errNotLinux }

func (b *Backend) Watch(context.Context, func(cgroup.Event)) error { return errNotLinux }

func (b *Backend) Usage(context.Context, cgroup.Scope) (cgroup.Usage, error) {
	return cgroup.Usage{}, errNotLinux
}

func (b *Backend) Kill(context.Context, cgroup.Scope) error { return errNotLinux }

func (b *Backend) RemoveScope(context.Context, cgroup.Scope) error { return errNotLinux }
