package egress

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/peer"
	"github.com/marshal-dev/marshal/reconcile"
)

// Event reasons.
const (
	// EventDenied is a Warning on a Workspace: a connection of one of its
	// agents was denied. Repeats for one destination and scope are
	// counted.
	EventDenied = "EgressDenied"
	// EventScopeNotLaunched is a Warning on the Profile a scope's name
	// claims: a process in a scope marshald did not launch used the
	// proxy, and counted as unscoped.
	EventScopeNotLaunched = "EgressScopeNotLaunched"
)

// EventRecorder records Warning events; *events.Recorder is one.
type EventRecorder interface {
	// WarningN records n repeats of a Warning about obj at once.
	WarningN(obj reconcile.Key, reason, message string, n int64)
}

// eventWindow is how often one event is recorded again at most: the
// first occurrence is recorded at once, repeats within the window are
// added up and recorded together at its end.
const eventWindow = time.Second

// maxPendingEvents bounds the distinct events waiting for their window.
const maxPendingEvents = 4096

type eventKey struct {
	obj     reconcile.Key
	reason  string
	message string
}

// aggregator turns the proxy's denials into Warning events, counted per
// destination, without a write to the event store per connection.
type aggregator struct {
	rec   EventRecorder
	clock clock.PassiveClock
	wake  chan struct{}

	// mu guards the fields that follow.
	mu      sync.Mutex
	pending map[eventKey]int64
	// last is when each event was last recorded, within the window.
	last map[eventKey]time.Time
}

func newAggregator(rec EventRecorder, c clock.PassiveClock) *aggregator {
	return &aggregator{
		rec: rec, clock: c, wake: make(chan struct{}, 1),
		pending: map[eventKey]int64{}, last: map[eventKey]time.Time{},
	}
}

// denied counts a denial of rec's connection on its workspace.
func (a *aggregator) denied(rec *Record) {
	if rec.Workspace == "" {
		return // a peer in no launch: the audit log has it
	}
	dest := rec.Host
	if rec.Port != 0 {
		dest = rec.Host + ":" + strconv.Itoa(int(rec.Port))
	}
	msg := fmt.Sprintf("denied %s for %s (profile %s): %s", dest, rec.Scope, rec.Profile, describeReason(rec))
	a.add(eventKey{reconcile.Key{Kind: v1alpha1.KindWorkspace, Name: rec.Workspace}, EventDenied, msg})
}

// notLaunched counts a connection from a scope marshald did not launch,
// or from a process in another network namespace than its scope's
// launch.
func (a *aggregator) notLaunched(who peer.Who) {
	msg := fmt.Sprintf("a process in %s, which marshald did not launch (%s), used the egress proxy and counts as unscoped",
		who.Claimed.Path, who.Why)
	if who.Unscoped == UnscopedOtherNetNS {
		home := ""
		if who.Home != "" {
			home = ", that of " + who.Home
		}
		msg = fmt.Sprintf("a process in %s but in another network namespace than its launch's (%s%s) used the egress proxy and counts as unscoped",
			who.Claimed.Path, who.Why, home)
	}
	a.add(eventKey{reconcile.Key{Kind: v1alpha1.KindProfile, Name: who.Claimed.Profile}, EventScopeNotLaunched, msg})
}

func (a *aggregator) add(k eventKey) {
	a.mu.Lock()
	if _, ok := a.pending[k]; ok || len(a.pending) < maxPendingEvents {
		a.pending[k]++
	}
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// run records what is due whenever something is added or a window ends,
// until ctx ends; then it records what is left.
func (a *aggregator) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		next := a.flush(false)
		if !next.IsZero() {
			timer.Reset(max(next.Sub(a.clock.Now()), 0))
		}
		select {
		case <-ctx.Done():
			a.flush(true)
			return
		case <-a.wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// flush records every pending event whose window is over (all, when
// all), and returns when the next one will be, zero for none.
func (a *aggregator) flush(all bool) time.Time {
	now := a.clock.Now()
	type due struct {
		k eventKey
		n int64
	}
	var record []due
	var next time.Time
	a.mu.Lock()
	for k, last := range a.last {
		if now.Sub(last) >= eventWindow && a.pending[k] == 0 {
			delete(a.last, k)
		}
	}
	for k, n := range a.pending {
		last, seen := a.last[k]
		at := last.Add(eventWindow)
		if all || !seen || !now.Before(at) {
			record = append(record, due{k, n})
			delete(a.pending, k)
			a.last[k] = now
			at = now.Add(eventWindow)
		}
		if _, waiting := a.pending[k]; waiting && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	a.mu.Unlock()
	for _, d := range record {
		a.rec.WarningN(d.k.obj, d.k.reason, d.k.message, d.n)
	}
	return next
}
