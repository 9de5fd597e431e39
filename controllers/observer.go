package controllers

import (
	"context"
	"sync"
	"time"

	"github.com/marshal-dev/marshal/internal/cgroup"
	"github.com/marshal-dev/marshal/reconcile"
)

// Bounds of the wait before the tree observer watches again after its
// watch failed.
const (
	watchRetryMin = 100 * time.Millisecond
	watchRetryMax = 30 * time.Second
)

// observer keeps Stores.Scopes equal to what the backend reports: it
// applies the backend's scope events as they come and relists
// (ListScopes) when the watch says it resynced, when the watch failed, and
// every interval. Events speed things up; the relist is the truth.
type observer struct {
	*env
	// relist asks the relist loop for a relist; it holds at most one
	// request, so a burst of requests costs one relist.
	relist chan struct{}

	// mu serialises applying events with relists, so that an event read
	// after a listing is applied after it.
	mu sync.Mutex
}

func newObserver(e *env) *observer {
	return &observer{env: e, relist: make(chan struct{}, 1)}
}

// sync lists the scopes and makes the store equal to the listing.
func (o *observer) sync(ctx context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	scopes, err := o.backend.ListScopes(ctx)
	if err != nil {
		return err
	}
	live := make(map[reconcile.Key]bool, len(scopes))
	for _, sc := range scopes {
		k := AgentKey(sc.Name)
		live[k] = true
		o.s.Scopes.Set(k, sc)
	}
	for _, k := range o.s.Scopes.Keys() {
		if !live[k] {
			o.s.Scopes.Delete(k)
		}
	}
	return nil
}

// apply applies one scope event to the store.
func (o *observer) apply(ev cgroup.Event) {
	o.mu.Lock()
	if ev.Type == cgroup.ScopeRemoved {
		o.s.Scopes.Delete(AgentKey(ev.Scope.Name))
	} else {
		o.s.Scopes.Set(AgentKey(ev.Scope.Name), ev.Scope)
	}
	o.mu.Unlock()
	if ev.Resync {
		o.requestRelist()
	}
}

func (o *observer) requestRelist() {
	select {
	case o.relist <- struct{}{}:
	default:
	}
}

// run watches and relists until ctx ends, and returns once both stopped.
func (o *observer) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { o.relistLoop(ctx) })
	o.watchLoop(ctx)
	wg.Wait()
}

// watchLoop runs the backend's Watch, and runs it again after a growing
// wait when it fails.
func (o *observer) watchLoop(ctx context.Context) {
	wait := watchRetryMin
	for {
		start := o.clock.Now()
		err := o.backend.Watch(ctx, o.apply)
		if ctx.Err() != nil {
			return
		}
		if o.clock.Since(start) > watchRetryMax {
			wait = watchRetryMin // it had been working: not a failure in a row
		}
		o.log.ErrorContext(ctx, "watching the scope tree failed; relisting and watching again",
			"err", err, "retry_in", wait)
		o.requestRelist()
		t := o.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		wait = min(2*wait, watchRetryMax)
	}
}

// relistLoop relists on request and every interval.
func (o *observer) relistLoop(ctx context.Context) {
	t := o.clock.NewTicker(o.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-o.relist:
		}
		if err := o.sync(ctx); err != nil && ctx.Err() == nil {
			o.log.ErrorContext(ctx, "relisting scopes failed", "err", err)
		}
	}
}
