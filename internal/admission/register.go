package admission

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/marshal-dev/marshal/internal/scope"
)

// authorize checks that p is a registration of this opening that is still
// the owner's current one.
func (b *batch) authorize(p Principal) error {
	if p.instance != "" {
		return b.authorizeInstance(p)
	}
	if p.epoch != b.a.epoch || p.owner == "" {
		return fmt.Errorf("not registered with this authority: %w", ErrUnauthorized)
	}
	o, ok := b.owner(p.owner)
	if !ok || o.Generation != p.generation || o.Process != p.process {
		return fmt.Errorf("owner %q generation %d is not current: %w", p.owner, p.generation, ErrUnauthorized)
	}
	return nil
}

// owned loads the attempt if p's owner admitted it; to any other owner it
// is not found, and to a consumer's instance unauthorized (ownedByInstance).
func (b *batch) owned(p Principal, id string, now time.Time) (*Record, error) {
	if err := b.authorize(p); err != nil {
		return nil, err
	}
	r, err := b.load(id, now)
	if err != nil {
		return nil, err
	}
	if p.instance != "" {
		if r == nil {
			return nil, fmt.Errorf("attempt %s: %w", id, ErrNotFound)
		}
		return r, ownedByInstance(p, r)
	}
	if r == nil || r.Owner != p.owner || r.Generation != p.generation {
		return nil, fmt.Errorf("attempt %s: %w", id, ErrNotFound)
	}
	return r, nil
}

func validKey(id string) error {
	if !scope.ValidID(id) {
		return fmt.Errorf("attempt key must be %d lowercase hex digits: %w", scope.IDLength, ErrInvalidRequest)
	}
	return nil
}

// Register binds owner at generation to the caller's kernel identity: the
// uid and pid the transport read with SO_PEERCRED, with the start time and
// boot the authority reads itself. A first registration, or one with a
// higher generation from the same uid, is recorded; re-registering the
// same generation from the same process returns a principal and writes
// nothing. A lower generation, another process at the same generation,
// another uid or a caller that is not running is ErrUnauthorized.
func (a *Authority) Register(ctx context.Context, owner string, generation uint64, peer Peer) (Principal, error) {
	if !validOwner(owner) || generation == 0 || peer.PID <= 0 {
		return Principal{}, fmt.Errorf("owner %q generation %d pid %d: %w", owner, generation, peer.PID, ErrInvalidRequest)
	}
	start, err := a.inspector.StartTime(peer.PID)
	if errors.Is(err, ErrNoProcess) {
		return Principal{}, fmt.Errorf("pid %d is not running: %w", peer.PID, ErrUnauthorized)
	}
	if err != nil {
		return Principal{}, err
	}
	proc := Process{UID: peer.UID, PID: peer.PID, StartTime: start, BootID: a.bootID}
	return call(ctx, a, a.clock.Now(), func(b *batch) (Principal, error) {
		cur, ok := b.owner(owner)
		switch {
		case !ok:
		case cur.Process.UID != proc.UID:
			return Principal{}, fmt.Errorf("owner %q belongs to another uid: %w", owner, ErrUnauthorized)
		case generation < cur.Generation:
			return Principal{}, fmt.Errorf("owner %q generation %d is stale: %w", owner, generation, ErrUnauthorized)
		case generation == cur.Generation && cur.Process != proc:
			return Principal{}, fmt.Errorf("owner %q generation %d is held by another process: %w", owner, generation, ErrUnauthorized)
		}
		if !ok || generation > cur.Generation {
			b.putOwner(ownerRecord{Name: owner, Generation: generation, Process: proc})
		}
		return Principal{owner: owner, generation: generation, process: proc, epoch: a.epoch}, nil
	})
}

// alive checks that the principal's process still runs as itself.
func (a *Authority) alive(p Principal) error {
	if p.process.PID == a.self.PID && p.process.StartTime == a.self.StartTime && a.self.StartTime != 0 {
		return nil // the process asking is the one answering
	}
	start, err := a.inspector.StartTime(p.process.PID)
	if errors.Is(err, ErrNoProcess) || (err == nil && start != p.process.StartTime) {
		return fmt.Errorf("pid %d is no longer the registered process: %w", p.process.PID, ErrUnauthorized)
	}
	return err
}
