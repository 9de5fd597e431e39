package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Bucket names one collection of keys.
type Bucket string

// The collections marshald keeps.
const (
	// LastGood maps a manifest file (its path inside the config dir) to
	// the objects of its last successful load.
	LastGood Bucket = "lastgood"
	// Generations maps "Kind/name" to the generation and spec of the
	// object as last declared.
	Generations Bucket = "generations"
	// Events maps a big-endian sequence number to an event.
	Events Bucket = "events"
	// Registrations maps an admission owner's name to the generation it
	// registered last.
	Registrations Bucket = "registrations"
	// APILastGood maps an object of the Kubernetes API ("profile/NAME")
	// to its last good version, as LastGood does a file.
	APILastGood Bucket = "apilastgood"
)

var (
	metaBucket   = []byte("meta")
	schemaKey    = []byte("schema")
	schemaValue  = []byte("marshal-state-v1")
	knownBuckets = []Bucket{LastGood, Generations, Events, Registrations, APILastGood}
)

// DB is the state database. Its methods are safe for concurrent use.
type DB struct {
	db *bolt.DB
}

// Open opens the state database at path, creating it (and its directory,
// mode 0700) when missing.
func Open(path string) (*DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 100 * time.Millisecond})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("%s: %w", path, ErrInUse)
		}
		return nil, fmt.Errorf("opening state %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(metaBucket)
		if meta == nil {
			if !emptyDB(tx) {
				return fmt.Errorf("%s: %w: not a marshal state database", path, ErrSchema)
			}
			var err error
			if meta, err = tx.CreateBucket(metaBucket); err != nil {
				return err
			}
			if err := meta.Put(schemaKey, schemaValue); err != nil {
				return err
			}
		} else if got := meta.Get(schemaKey); !bytes.Equal(got, schemaValue) {
			return fmt.Errorf("%s: %w %q", path, ErrSchema, got)
		}
		for _, b := range knownBuckets {
			if _, err := tx.CreateBucketIfNotExists([]byte(b)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &DB{db: db}, nil
}

func emptyDB(tx *bolt.Tx) bool {
	empty := true
	tx.ForEach(func([]byte, *bolt.Bucket) error {
		empty = false
		return nil
	})
	return empty
}

// Close closes the database.
func (d *DB) Close() error { return d.db.Close() }

// Get returns a copy of the value of key in b, or nil when absent.
func (d *DB) Get(b Bucket, key string) ([]byte, error) {
	var v []byte
	err := d.db.View(func(tx *bolt.Tx) error {
		if got := tx.Bucket([]byte(b)).Get([]byte(key)); got != nil {
			v = bytes.Clone(got)
		}
		return nil
	})
	return v, err
}

// Write applies puts (value nil: delete) to b in one transaction. Writing
// what is already there writes nothing.
func (d *DB) Write(b Bucket, puts map[string][]byte) error {
	return d.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte(b))
		for k, v := range puts {
			old := bk.Get([]byte(k))
			var err error
			switch {
			case v == nil && old != nil:
				err = bk.Delete([]byte(k))
			case v != nil && !bytes.Equal(old, v):
				err = bk.Put([]byte(k), v)
			}
			if err != nil {
				return fmt.Errorf("state %s %q: %w", b, k, err)
			}
		}
		return nil
	})
}

// ForEach calls fn for every key of b in byte order. The value is only
// valid during the call.
func (d *DB) ForEach(b Bucket, fn func(key string, value []byte) error) error {
	return d.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(b)).ForEach(func(k, v []byte) error {
			return fn(string(k), v)
		})
	})
}

// WriteSeq applies puts (value nil: delete) to the entries of b by
// sequence number in one transaction, deletes the oldest entries beyond
// keep and moves b's sequence to the highest number written, so that
// Sequence never goes back.
func (d *DB) WriteSeq(b Bucket, puts map[uint64][]byte, keep int) error {
	return d.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte(b))
		top := bk.Sequence()
		for seq, v := range puts {
			var err error
			if v == nil {
				err = bk.Delete(seqKey(seq))
			} else {
				err = bk.Put(seqKey(seq), v)
				top = max(top, seq)
			}
			if err != nil {
				return fmt.Errorf("state %s %d: %w", b, seq, err)
			}
		}
		if err := bk.SetSequence(top); err != nil {
			return err
		}
		n := 0
		c := bk.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			n++
		}
		for k, _ := c.First(); k != nil && n > keep; k, _ = c.First() {
			if err := c.Delete(); err != nil {
				return err
			}
			n--
		}
		return nil
	})
}

// Sequence returns the highest sequence number b has held.
func (d *DB) Sequence(b Bucket) (uint64, error) {
	var seq uint64
	err := d.db.View(func(tx *bolt.Tx) error {
		seq = tx.Bucket([]byte(b)).Sequence()
		return nil
	})
	return seq, err
}

// ForEachSeq calls fn for every entry of b in sequence order.
func (d *DB) ForEachSeq(b Bucket, fn func(seq uint64, value []byte) error) error {
	return d.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(b)).ForEach(func(k, v []byte) error {
			if len(k) != 8 {
				return nil
			}
			return fn(beUint64(k), v)
		})
	})
}

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

func beUint64(k []byte) uint64 { return binary.BigEndian.Uint64(k) }
