//go:build !linux

package hostaddr

import "context"

type watcher struct{}

// New returns the empty set: outside Linux, addresses are not watched.
func New() (*Set, error) { return newSet(), nil }

// Run returns when ctx ends.
func (s *Set) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}
