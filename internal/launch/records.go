package launch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/marshal-dev/marshal/api/v1alpha1"
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

// FileStore keeps the records in one file of its directory, records.log,
// a line of JSON per change (a record put, or the ID of one deleted), and
// the owner's generation in the state database. One FileStore uses a
// directory at a time.
//
// Records are written without fsync, by design: they must outlive a crash
// of the daemon, which the kernel's page cache does, but never a reboot,
// which ends every scope they describe (a record of an earlier boot is
// dropped at recovery, as its scope is gone). A launch thus costs no disk
// flush of its own, and, the file being open already, no creation or
// removal of one either: each change is one write(2) at the file's end,
// which the one reader, recovery after the daemon ended, sees whole or,
// when the daemon died in its midst, as a last line that does not decode
// and is skipped, as is one a power loss damaged. That launch never got
// as far as its scope. Once the lines of records deleted outweigh those
// of records kept, the file is written anew with the kept ones alone and
// renamed over the old: its size follows the launches that live, not the
// launches made. Records of a version that kept a file per record, as
// ID.json, are read too, and moved into the log by List.
type FileStore struct {
	dir string
	db  *state.DB

	mu   sync.Mutex
	log  *os.File // open for appending; nil until first used
	size int64    // bytes in log
	// kept is each record kept, by ID, with its line, and keptSz the
	// lines' bytes: what a rewrite of the log writes.
	kept   map[string]keptRecord
	keptSz int64
}

// NewFileStore returns the store of the records in dir, and of the
// generations in db.
func NewFileStore(dir string, db *state.DB) *FileStore {
	return &FileStore{dir: dir, db: db}
}

var _ Store = (*FileStore)(nil)

// logName is the name of the log in the store's directory; a rewrite is
// made as compactName, then renamed over it.
const (
	logName     = "records.log"
	compactName = "records.log.new"
)

// keptRecord is a record kept and its line in the log.
type keptRecord struct {
	rec  Record
	line []byte
}

// change is a line of the log: a record put, or the ID of one deleted.
type change struct {
	Put    *Record `json:"put,omitempty"`
	Delete string  `json:"delete,omitempty"`
}

// Put implements Store.
func (s *FileStore) Put(_ context.Context, r Record) error {
	if !scope.ValidID(r.ID) {
		return fmt.Errorf("launch record %q: invalid id", r.ID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.put(r); err != nil {
		return fmt.Errorf("launch record %s: %w", r.ID, err)
	}
	return nil
}

// put appends r to the log and keeps it. The caller holds s.mu.
func (s *FileStore) put(r Record) error {
	line, err := json.Marshal(change{Put: &r})
	if err != nil {
		return err
	}
	line = append(line, '\n')
	if err := s.append(line); err != nil {
		return err
	}
	s.keep(r, line)
	return nil
}

// keep and forget change what is kept. The caller holds s.mu.
func (s *FileStore) keep(r Record, line []byte) {
	s.keptSz += int64(len(line)) - int64(len(s.kept[r.ID].line))
	s.kept[r.ID] = keptRecord{rec: r, line: line}
}

func (s *FileStore) forget(id string) {
	s.keptSz -= int64(len(s.kept[id].line))
	delete(s.kept, id)
}

// Delete implements Store.
func (s *FileStore) Delete(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.open(); err != nil {
		return fmt.Errorf("launch record %s: %w", id, err)
	}
	if _, ok := s.kept[id]; !ok {
		return nil
	}
	line, err := json.Marshal(change{Delete: id})
	if err != nil {
		return err
	}
	if err := s.append(append(line, '\n')); err != nil {
		return fmt.Errorf("launch record %s: %w", id, err)
	}
	s.forget(id)
	if s.size > 2*s.keptSz+compactAbove {
		if err := s.compact(); err != nil {
			return fmt.Errorf("launch records: %w", err)
		}
	}
	return nil
}

// compactAbove is how many bytes of deleted records' lines the log holds
// at most beyond twice its kept ones': some hundred launches between
// rewrites.
const compactAbove = 64 << 10

// List implements Store. It reads the log and the records kept a file
// each by an earlier version, which it moves into the log. A record that
// does not decode is skipped: it names no scope this build could act on.
func (s *FileStore) List(_ context.Context) ([]Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.close()
	if err := s.open(); err != nil {
		return nil, fmt.Errorf("launch records: %w", err)
	}
	if err := s.adoptFiles(); err != nil {
		return nil, fmt.Errorf("launch records: %w", err)
	}
	out := make([]Record, 0, len(s.kept))
	for _, k := range s.kept {
		out = append(out, k.rec)
	}
	slices.SortFunc(out, func(a, b Record) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// open opens the log, once, and reads what it keeps. A last line cut
// short by a crash is cut off, so that the next line starts on a line of
// its own. The caller holds s.mu.
func (s *FileStore) open() error {
	if s.log != nil {
		return nil
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(s.dir, logName), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return err
	}
	whole := bytes.LastIndexByte(data, '\n') + 1
	if whole < len(data) {
		if err := f.Truncate(int64(whole)); err != nil {
			f.Close()
			return err
		}
	}
	s.log, s.size, s.kept, s.keptSz = f, int64(whole), map[string]keptRecord{}, 0
	for line := range bytes.Lines(data[:whole]) {
		var c change
		switch {
		case json.Unmarshal(line, &c) != nil:
		case c.Put != nil && scope.ValidID(c.Put.ID):
			s.keep(*c.Put, bytes.Clone(line))
		case c.Delete != "":
			s.forget(c.Delete)
		}
	}
	return nil
}

// append writes line at the log's end in one write(2). A write that
// fails is cut off again, so that no part of it joins the next line. The
// caller holds s.mu.
func (s *FileStore) append(line []byte) error {
	if err := s.open(); err != nil {
		return err
	}
	if _, err := s.log.Write(line); err != nil {
		return errors.Join(err, s.log.Truncate(s.size))
	}
	s.size += int64(len(line))
	return nil
}

// compact writes the kept records anew and renames the file over the
// log. The caller holds s.mu.
func (s *FileStore) compact() error {
	var data []byte
	for _, k := range s.kept {
		data = append(data, k.line...)
	}
	path := filepath.Join(s.dir, compactName)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	if err := os.Rename(path, filepath.Join(s.dir, logName)); err != nil {
		return err
	}
	s.close()
	return s.open()
}

// adoptFiles moves the records an earlier version kept a file each, as
// ID.json, into the log; an empty one, or one that does not decode, is
// removed. The caller holds s.mu.
func (s *FileStore) adoptFiles() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !scope.ValidID(id) {
			continue
		}
		path := filepath.Join(s.dir, e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var r Record
		if json.Unmarshal(data, &r) == nil && r.ID == id {
			if err := s.put(r); err != nil {
				return err
			}
		}
		if err := os.Remove(path); err != nil {
			return err
		}
	}
	return nil
}

// Close closes the log. The store opens it again when next used.
func (s *FileStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.close()
}

// close closes the log; the caller holds s.mu.
func (s *FileStore) close() error {
	if s.log == nil {
		return nil
	}
	err := s.log.Close()
	s.log = nil
	return err
}

// NextGeneration implements Store.
func (s *FileStore) NextGeneration(_ context.Context, owner string) (uint64, error) {
	cur, err := s.db.Get(state.Registrations, owner)
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
	if err := s.db.Write(state.Registrations, map[string][]byte{owner: []byte(strconv.FormatUint(gen, 10))}); err != nil {
		return 0, err
	}
	return gen, nil
}
