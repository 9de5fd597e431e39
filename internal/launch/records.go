package launch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/rawfile"
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
	// Consumer is, for a launch of a consumer of DevGuard's wire (by its
	// launch helper, in no workspace), the consumer whose instance owns
	// the attempt.
	Consumer string `json:"consumer,omitempty"`
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
	// Isolation is netns when the launch runs in a network namespace of
	// its own, "" when it runs in the host's: the proxy attributes its
	// connections only from that namespace.
	Isolation v1alpha1.Isolation `json:"isolation,omitempty"`
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

// FileStore keeps each record as a file of its own in Dir, and the
// owner's generation in the state database.
//
// Records are written without fsync, by design: they must outlive a crash
// of the daemon, which the kernel's page cache does, but never a reboot,
// which ends every scope they describe (a record of an earlier boot is
// dropped at recovery, as its scope is gone). A launch thus costs no disk
// flush of its own. A record is written in place with one write(2), not
// renamed over: the one reader, recovery after the daemon ended, sees all
// of it or, when the daemon died between creating the file and writing
// it, an empty file, which does not decode and is skipped, as is one a
// power loss damaged. That launch never got as far as its scope. Writing
// in place costs half of a write and rename on ext4. The generation is
// kept durably: it must never go back.
type FileStore struct {
	Dir string
	DB  *state.DB
}

var _ Store = FileStore{}

// Put implements Store.
func (s FileStore) Put(_ context.Context, r Record) error {
	if !scope.ValidID(r.ID) {
		return fmt.Errorf("launch record %q: invalid id", r.ID)
	}
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("launch records: %w", err)
	}
	if err := writeOnce(filepath.Join(s.Dir, r.ID+".json"), data); err != nil {
		return fmt.Errorf("launch record %s: %w", r.ID, err)
	}
	return nil
}

// writeOnce writes data to the file at path, created or truncated, in one
// write(2).
func writeOnce(path string, data []byte) error {
	err := rawfile.Write(path, data, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		os.Remove(path)
	}
	return err
}

// Delete implements Store.
func (s FileStore) Delete(_ context.Context, id string) error {
	if err := os.Remove(filepath.Join(s.Dir, id+".json")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("launch record %s: %w", id, err)
	}
	return nil
}

// List implements Store. A record that does not decode is skipped: it
// names no scope this build could act on.
func (s FileStore) List(_ context.Context) ([]Record, error) {
	entries, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("launch records: %w", err)
	}
	var out []Record
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !scope.ValidID(id) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(s.Dir, e.Name()))
		if err != nil {
			continue
		}
		var r Record
		if json.Unmarshal(data, &r) == nil && r.ID == id {
			out = append(out, r)
		}
	}
	return out, nil
}

// NextGeneration implements Store.
func (s FileStore) NextGeneration(_ context.Context, owner string) (uint64, error) {
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
