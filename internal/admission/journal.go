package admission

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// The journal's layout. Values are JSON.
//
//	meta      magic, schema, totals (what charged attempts hold: sum and
//	          count), the state of the write-ahead log (wal.go)
//	attempts  sequence → Record, with the SHA-256 of its launch permit
//	owners    owner name → ownerRecord
//	instances consumer NUL generation NUL instance id → instanceRecord
//
// Attempts are keyed by the order in which they were first recorded (an
// 8-byte big-endian sequence), not by their random IDs: new attempts land
// at the right edge of the tree, and a later step of an attempt mostly
// finds it there too, so that a commit of many requests rewrites a few
// leaves rather than one per request. An index of ID → sequence is kept
// in memory, built when the journal is opened.
//
// A checkpoint (wal.go) rewrites those leaves, their branch pages and the
// root page, where the small meta bucket lives inline: nothing more. An
// answer waits for one fdatasync, of its entry in the log.
const (
	// SchemaVersion is the journal schema this build writes. It reads
	// schemas 2 (no consumers' instances) and 3 (no write-ahead log) too,
	// and makes them 4 as it opens them. A build that knows no log
	// refuses schema 4 rather than lose what the log holds.
	SchemaVersion = "4"
	journalMagic  = "marshal.dev/admission-journal"
	// schemaWithoutInstances is the schema before consumers' instances,
	// schemaWithoutLog the one before the write-ahead log.
	schemaWithoutInstances = "2"
	schemaWithoutLog       = "3"
)

var (
	bucketMeta      = []byte("meta")
	bucketAttempts  = []byte("attempts")
	bucketOwners    = []byte("owners")
	bucketInstances = []byte("instances")
	keyMagic        = []byte("magic")
	keySchema       = []byte("schema")
	keyTotals       = []byte("totals")
)

// DefaultLockTimeout is how long Open waits for the journal's lock before
// it reports ErrJournalInUse.
const DefaultLockTimeout = 200 * time.Millisecond

// totals is the charged index kept in meta and checked at every open.
type totals struct {
	Charged Budget `json:"charged"`
	Count   int    `json:"count"`
}

// ownerRecord is a registered owner.
type ownerRecord struct {
	Name       string  `json:"name"`
	Generation uint64  `json:"generation"`
	Process    Process `json:"process"`
}

func (o *ownerRecord) validate(name string) error {
	if o.Name != name || !validOwner(o.Name) || o.Generation == 0 || o.Process.PID <= 0 || o.Process.BootID == "" {
		return fmt.Errorf("owner %+q: %w", name, ErrJournalInconsistent)
	}
	return nil
}

// Create makes a new, empty journal at path. It never touches an existing
// file: the journal is built under a temporary name in the same directory
// and linked into place only if path is still free, so a crash leaves no
// half-made journal under the real name.
func Create(path string) (err error) {
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("%s: %w", path, ErrJournalExists)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("creating journal: %w", err)
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".admission-journal-*")
	if err != nil {
		return fmt.Errorf("creating journal: %w", err)
	}
	tmpName := tmp.Name()
	tmp.Close()
	defer os.Remove(tmpName)
	db, err := bolt.Open(tmpName, 0o600, &bolt.Options{Timeout: DefaultLockTimeout})
	if err != nil {
		return fmt.Errorf("creating journal: %w", err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		for _, b := range [][]byte{bucketAttempts, bucketOwners, bucketInstances} {
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		t, _ := json.Marshal(totals{})
		for k, v := range map[string][]byte{string(keyMagic): []byte(journalMagic), string(keySchema): []byte(SchemaVersion), string(keyTotals): t,
			string(keyWAL): walState{salt: newSalt()}.bytes()} {
			if err := meta.Put([]byte(k), v); err != nil {
				return err
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("creating journal: %w", err)
	}
	if err := os.Link(tmpName, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s: %w", path, ErrJournalExists)
		}
		return fmt.Errorf("creating journal: %w", err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// openBolt opens an existing journal file, checks it and returns it
// opened for writing with its exclusive lock, and what the check read. It
// never creates the file: bbolt would, and would initialize an empty one.
//
// The journal does not keep bbolt's freelist on disk (one page less to
// write per commit); bbolt rebuilds it at open by walking the tree on a
// goroutine that panics on a damaged page, which no caller could recover.
// So the file is first opened read-only and walked here, where a damaged
// page is an error, and opened for writing only once that walk passed.
func openBolt(path string, timeout time.Duration, maxSize int, boot string) (*bolt.DB, *loaded, error) {
	ro, err := openBoltFile(path, &bolt.Options{Timeout: timeout, ReadOnly: true})
	if err != nil {
		return nil, nil, err
	}
	var l *loaded
	err = ro.View(func(tx *bolt.Tx) error {
		var err error
		l, err = checkJournal(tx, boot)
		return err
	})
	if cerr := ro.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	db, err := openBoltFile(path, &bolt.Options{
		Timeout:        timeout,
		MaxSize:        maxSize,
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
	})
	if err != nil {
		return nil, nil, err
	}
	return db, l, nil
}

// openBoltFile opens path with opts, refusing what is not a journal file
// before bbolt maps it.
func openBoltFile(path string, opts *bolt.Options) (db *bolt.DB, err error) {
	defer func() {
		// bbolt may panic on a file that is not a database at all.
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("%s: %v: %w", path, r, ErrJournalCorrupt)
		}
	}()
	var notRegular, empty bool
	opts.OpenFile = func(name string, flag int, perm os.FileMode) (*os.File, error) {
		// O_NONBLOCK keeps a FIFO in the journal's place from blocking
		// the open; on a regular file it changes nothing.
		f, err := os.OpenFile(name, flag&^os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, perm)
		if err != nil {
			return nil, err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		notRegular, empty = !st.Mode().IsRegular(), st.Size() == 0
		if notRegular || empty {
			f.Close()
			return nil, fs.ErrInvalid
		}
		if err := checkMetaPages(f, st.Size()); err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	}
	// A damaged file can make bbolt touch its memory map beyond the end
	// of the file; that fault becomes a panic recovered above, not a crash.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	db, err = bolt.Open(path, 0o600, opts)
	switch {
	case err == nil:
		return db, nil
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%s: %w", path, ErrJournalMissing)
	case errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EISDIR) || notRegular:
		return nil, fmt.Errorf("%s is not a regular file: %w", path, ErrJournalForeign)
	case empty:
		return nil, fmt.Errorf("%s is empty: %w", path, ErrJournalCorrupt)
	case errors.Is(err, ErrJournalCorrupt):
		return nil, fmt.Errorf("%s: %w", path, err)
	case errors.Is(err, bolterrors.ErrTimeout):
		return nil, fmt.Errorf("%s: %w", path, ErrJournalInUse)
	case errors.Is(err, fs.ErrPermission):
		return nil, fmt.Errorf("opening journal: %w", err)
	}
	return nil, fmt.Errorf("%s: %w: %w", path, ErrJournalCorrupt, err)
}

// bbolt's meta page, as its internal/common package lays it out after a
// 16-byte page header: magic, version, page size, flags, root bucket
// (page and sequence), freelist page, high-water page, txid, checksum
// (FNV-64a of the fields before it).
const (
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	boltPageHeader   = 16
	boltMetaChecksum = 56
)

// checkMetaPages refuses a file whose valid meta page claims more pages
// than the file holds: bbolt would read past the end of its memory map
// and the process would die of SIGBUS.
func checkMetaPages(f *os.File, size int64) error {
	read := func(off int64) (pageSize uint32, highWater uint64, ok bool) {
		buf := make([]byte, boltPageHeader+boltMetaChecksum+8)
		if _, err := f.ReadAt(buf, off); err != nil {
			return 0, 0, false
		}
		m := buf[boltPageHeader:]
		le := binary.NativeEndian
		h := fnv.New64a()
		h.Write(m[:boltMetaChecksum])
		if le.Uint32(m[0:]) != boltMagic || le.Uint32(m[4:]) != boltVersion || le.Uint64(m[boltMetaChecksum:]) != h.Sum64() {
			return 0, 0, false
		}
		return le.Uint32(m[8:]), le.Uint64(m[40:]), true
	}
	second := int64(os.Getpagesize())
	if ps, hw, ok := read(0); ok {
		second = int64(ps)
		if hw > uint64(size)/uint64(ps) {
			return fmt.Errorf("meta page 0 claims %d pages of %d bytes, the file has %d bytes: %w", hw, ps, size, ErrJournalCorrupt)
		}
	}
	if ps, hw, ok := read(second); ok && hw > uint64(size)/uint64(ps) {
		return fmt.Errorf("meta page 1 claims %d pages of %d bytes, the file has %d bytes: %w", hw, ps, size, ErrJournalCorrupt)
	}
	return nil
}

// attemptKey is the journal key of the attempt recorded seq-th.
func attemptKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), seq)
}

// loaded is what validation read from a journal.
type loaded struct {
	totals totals
	// keys maps every attempt's ID to its sequence; next is the sequence
	// of the next new attempt.
	keys      map[string]uint64
	next      uint64
	charged   map[string]*Record
	prepared  map[string]time.Time
	owners    map[string]ownerRecord
	instances map[instanceKey]instanceRecord
	// recover lists the charged records that recovery must rewrite.
	recover []*Record
	// migrate is set for a journal of an earlier schema, which Open makes
	// this one; log is the state of the log, when the schema has one.
	migrate bool
	log     *walState
}

// storedRecord is a Record as the journal holds it: with its permit hash.
type storedRecord struct {
	Record
	PermitHash string `json:"permit_sha256,omitempty"`
}

func encodeRecord(r *Record) ([]byte, error) {
	return json.Marshal(storedRecord{Record: *r, PermitHash: r.permitHash})
}

// decodeRecord decodes the record stored under seq; id, when not empty,
// is the attempt the index says is there.
func decodeRecord(seq uint64, id string, data []byte) (*Record, error) {
	if data == nil {
		return nil, fmt.Errorf("attempt %+q: no record at %d: %w", id, seq, ErrJournalInconsistent)
	}
	var s storedRecord
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("attempt at %d: %w: %w", seq, ErrJournalInconsistent, err)
	}
	r := s.Record
	r.permitHash = s.PermitHash
	if id != "" && r.ID != id {
		return nil, fmt.Errorf("attempt %+q: record %d holds %+q: %w", id, seq, r.ID, ErrJournalInconsistent)
	}
	return &r, nil
}

// checkJournal validates a journal read-only: identity, schema, every
// record, the charged totals recomputed from the records, every owner,
// and bbolt's own consistency. It also lists the records that recovery
// for boot changes. A damaged page is an error here, never a crash.
func checkJournal(tx *bolt.Tx, boot string) (*loaded, error) {
	l, err := checkRecords(tx, boot)
	if err != nil {
		return nil, err
	}
	var errs []error
	for e := range tx.Check() {
		errs = append(errs, e)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrJournalCorrupt, errors.Join(errs...))
	}
	return l, nil
}

// checkRecords is checkJournal without bbolt's own check, for a
// transaction that has changes not yet committed.
func checkRecords(tx *bolt.Tx, boot string) (l *loaded, err error) {
	defer func() {
		if r := recover(); r != nil {
			l, err = nil, fmt.Errorf("%v: %w", r, ErrJournalCorrupt)
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	meta := tx.Bucket(bucketMeta)
	if meta == nil || string(meta.Get(keyMagic)) != journalMagic {
		return nil, ErrJournalForeign
	}
	schema := string(meta.Get(keySchema))
	if schema != SchemaVersion && schema != schemaWithoutLog && schema != schemaWithoutInstances {
		return nil, &SchemaError{Found: schema, Want: SchemaVersion}
	}
	attempts, owners, instances := tx.Bucket(bucketAttempts), tx.Bucket(bucketOwners), tx.Bucket(bucketInstances)
	if attempts == nil || owners == nil || (instances == nil) != (schema == schemaWithoutInstances) {
		return nil, fmt.Errorf("a bucket is missing: %w", ErrJournalInconsistent)
	}
	var stored totals
	if err := json.Unmarshal(meta.Get(keyTotals), &stored); err != nil {
		return nil, fmt.Errorf("totals: %w: %w", ErrJournalInconsistent, err)
	}
	l = &loaded{keys: map[string]uint64{}, next: 1, charged: map[string]*Record{}, prepared: map[string]time.Time{}, owners: map[string]ownerRecord{},
		instances: map[instanceKey]instanceRecord{}, migrate: schema != SchemaVersion}
	if schema == SchemaVersion {
		st, err := parseWALState(meta.Get(keyWAL))
		if err != nil {
			return nil, err
		}
		l.log = &st
	}
	// Walking every record first touches every page of the tree in this
	// goroutine, where a fault is recovered, before bbolt's checker walks
	// it on its own goroutine.
	err = attempts.ForEach(func(k, v []byte) error { return l.addAttempt(k, v, boot) })
	if err != nil {
		return nil, err
	}
	if stored != l.totals {
		return nil, fmt.Errorf("charged totals %+v, the records add up to %+v: %w", stored, l.totals, ErrJournalInconsistent)
	}
	if err := owners.ForEach(l.addOwner); err != nil {
		return nil, err
	}
	if instances != nil {
		if err := instances.ForEach(l.addInstance); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// addAttempt checks the attempt stored under k and adds it to l: its
// sequence, and when charged its reservation, and whether recovery for
// boot changes it.
func (l *loaded) addAttempt(k, v []byte, boot string) error {
	if len(k) != 8 || binary.BigEndian.Uint64(k) == 0 {
		return fmt.Errorf("attempt key %x is not a sequence: %w", k, ErrJournalInconsistent)
	}
	seq := binary.BigEndian.Uint64(k)
	r, err := decodeRecord(seq, "", v)
	if err != nil {
		return err
	}
	if err := r.validate(); err != nil {
		return err
	}
	if other, dup := l.keys[r.ID]; dup {
		return fmt.Errorf("attempt %+q is recorded at %d and %d: %w", r.ID, other, seq, ErrJournalInconsistent)
	}
	l.keys[r.ID] = seq
	l.next = seq + 1 // ForEach walks the keys in order
	if !r.Phase.Charged() {
		return nil
	}
	l.charged[r.ID] = r
	l.totals.Charged = l.totals.Charged.Add(r.Reservation.Quantities)
	l.totals.Count++
	switch {
	case r.BootID != boot:
		l.recover = append(l.recover, r)
	case r.Phase == PhasePrepared:
		l.prepared[r.ID] = r.Reservation.Deadline
	case r.Phase != PhaseSuspect:
		l.recover = append(l.recover, r)
	}
	return nil
}

// addOwner checks the owner stored under k and adds it to l.
func (l *loaded) addOwner(k, v []byte) error {
	var o ownerRecord
	if err := json.Unmarshal(v, &o); err != nil {
		return fmt.Errorf("owner %+q: %w: %w", k, ErrJournalInconsistent, err)
	}
	if err := o.validate(string(k)); err != nil {
		return err
	}
	l.owners[o.Name] = o
	return nil
}

// addInstance checks the instance stored under k and adds it to l.
func (l *loaded) addInstance(k, v []byte) error {
	var r instanceRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return fmt.Errorf("instance %q: %w: %w", k, ErrJournalInconsistent, err)
	}
	if err := r.validate(k); err != nil {
		return err
	}
	l.instances[r.key()] = r
	return nil
}

// recovered returns what restart makes of a charged record: a prepared
// attempt of an earlier boot has expired; any other attempt of an earlier
// boot is released, since every process of that boot has ended; committed
// work of this boot becomes suspect until evidence settles it.
func recovered(r *Record, boot string) *Record {
	n := r.clone()
	switch {
	case r.BootID != boot && r.Phase == PhasePrepared:
		n.Phase = PhaseExpired
	case r.BootID != boot:
		n.Phase, n.Release = PhaseReleased, ReleasePreviousBoot
	default:
		n.Phase = PhaseSuspect
	}
	return n
}

// migrate makes a journal of an earlier schema one of this schema: the
// bucket of consumers' instances, empty, where it is missing. The log's
// state is the caller's to write.
func migrate(tx *bolt.Tx) error {
	if tx.Bucket(bucketInstances) == nil {
		if _, err := tx.CreateBucket(bucketInstances); err != nil {
			return err
		}
	}
	return tx.Bucket(bucketMeta).Put(keySchema, []byte(SchemaVersion))
}

// recordPuts returns the puts that store records, each under the sequence
// keyOf gives its ID, and the totals; it is the only place records are
// encoded for the journal.
func recordPuts(recs map[string]*Record, keyOf func(id string) (uint64, bool), t totals) ([]put, error) {
	puts := make([]put, 0, len(recs)+1)
	for id, r := range recs {
		seq, ok := keyOf(id)
		if !ok {
			return nil, fmt.Errorf("attempt %s has no sequence", id)
		}
		data, err := encodeRecord(r)
		if err != nil {
			return nil, err
		}
		puts = append(puts, put{walAttempts, attemptKey(seq), data})
	}
	data, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	return append(puts, put{walMeta, keyTotals, data}), nil
}

// resumeLog brings the journal db, which checkJournal read as l, up to
// date with its log at logPath, makes it of this schema and renews the
// log's salt, in one commit; it returns what the journal holds then and
// the log's state. What the log adds is checked before it is committed.
func resumeLog(db *bolt.DB, logPath string, l *loaded, boot string) (*loaded, walState, error) {
	pending := walPending{}
	var seq uint64
	if l.log != nil {
		data, err := readLog(logPath)
		if err != nil {
			return nil, walState{}, err
		}
		if pending, seq, err = replayLog(data, *l.log); err != nil {
			return nil, walState{}, err
		}
	}
	if l.log != nil && len(pending) == 0 {
		// No entry under the salt: it stays, and nothing is written.
		return l, *l.log, nil
	}
	next := walState{salt: newSalt(), seq: seq}
	err := db.Update(func(tx *bolt.Tx) error {
		if l.migrate {
			if err := migrate(tx); err != nil {
				return fmt.Errorf("making schema %s: %w: %w", SchemaVersion, ErrJournalFailed, err)
			}
		}
		if len(pending) > 0 {
			if err := putAll(tx, pending.puts()); err != nil {
				return fmt.Errorf("replaying the log: %w: %w", ErrJournalFailed, err)
			}
			var err error
			if l, err = checkRecords(tx, boot); err != nil {
				return fmt.Errorf("replaying the log: %w", err)
			}
		}
		if err := tx.Bucket(bucketMeta).Put(keyWAL, next.bytes()); err != nil {
			return fmt.Errorf("renewing the log: %w: %w", ErrJournalFailed, err)
		}
		return nil
	})
	if err != nil {
		return nil, walState{}, err
	}
	return l, next, nil
}

// ctxWriter stops a copy when its context ends.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}
