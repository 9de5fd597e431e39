package launch

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/marshal-dev/marshal/internal/scope"
	"github.com/marshal-dev/marshal/internal/state"
)

// Record is what is kept of a launch from before its scope exists until
// the scope is gone: enough to know, after a restart, which workspace the
// scope counts for, which attempt it is bound to, which process was
// launched and when its timeout expires.
type Record struct {
	// ID is the scope's 32 hex digits; the attempt's too when admitted.
	ID        string `json:"id"`
	Workspace string `json:"workspace"`
	Profile   string `json:"profile"`
	// Attempt is the admission attempt, "" when the launch runs
	// unaccounted.
	Attempt string `json:"attempt,omitempty"`
	// Generation is the owner generation that launched it.
	Generation uint64 `json:"generation,omitempty"`
	// PID, UID and StartTime name the launched process, in boot BootID.
	PID       int    `json:"pid"`
	UID       uint32 `json:"uid"`
	StartTime uint64 `json:"start_time"`
	BootID    string `json:"boot_id"`
	// Started is when the launch began; Deadline when its timeout
	// expires, zero for none.
	Started  time.Time `json:"started"`
	Deadline time.Time `json:"deadline,omitzero"`
}

// Scope returns the unit name of the launch's scope.
func (r Record) Scope() string { return scope.ScopeName(r.Profile, r.ID) }

// Store keeps launch records and the owner's generation durably: every
// write is committed when it returns.
type Store interface {
	// Put writes the record of r.ID.
	Put(ctx context.Context, r Record) error
	// Delete removes the record of id; a missing one is no error.
	Delete(ctx context.Context, id string) error
	// List returns every record.
	List(ctx context.Context) ([]Record, error)
	// NextGeneration returns owner's next generation, one more than the
	// last it returned (1 the first time), and keeps it.
	NextGeneration(ctx context.Context, owner string) (uint64, error)
}

// StateStore keeps records in the state database: the Launches bucket,
// and the generation in the Registrations bucket.
type StateStore struct {
	DB *state.DB
}

var _ Store = StateStore{}

// Put implements Store.
func (s StateStore) Put(_ context.Context, r Record) error {
	if !scope.ValidID(r.ID) {
		return fmt.Errorf("launch record %q: invalid id", r.ID)
	}
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.DB.Write(state.Launches, map[string][]byte{r.ID: data})
}

// Delete implements Store.
func (s StateStore) Delete(_ context.Context, id string) error {
	return s.DB.Write(state.Launches, map[string][]byte{id: nil})
}

// List implements Store. A record that does not decode is skipped: it
// names no scope this build could act on.
func (s StateStore) List(_ context.Context) ([]Record, error) {
	var out []Record
	err := s.DB.ForEach(state.Launches, func(k string, v []byte) error {
		var r Record
		if json.Unmarshal(v, &r) == nil && r.ID == k && scope.ValidID(k) {
			out = append(out, r)
		}
		return nil
	})
	return out, err
}

// NextGeneration implements Store.
func (s StateStore) NextGeneration(_ context.Context, owner string) (uint64, error) {
	cur, err := s.DB.Get(state.Registrations, owner)
	if err != nil {
		return 0, err
	}
	var gen uint64
	if len(cur) > 0 {
		if gen, err = strconv.ParseUint(string(cur), 10, 64); err != nil {
			return 0, fmt.Errorf("generation of %q: %q is not a number", owner, cur)
		}
	}
	gen++
	if err := s.DB.Write(state.Registrations, map[string][]byte{owner: []byte(strconv.FormatUint(gen, 10))}); err != nil {
		return 0, err
	}
	return gen, nil
}
