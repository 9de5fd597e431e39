package state

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

func openTemp(t *testing.T) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sub", "state.db")
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, path
}

func TestWriteGetAcrossReopen(t *testing.T) {
	d, path := openTemp(t)
	if err := d.Write(LastGood, map[string][]byte{"a.yaml": []byte("A"), "b.yaml": []byte("B")}); err != nil {
		t.Fatal(err)
	}
	if err := d.Write(LastGood, map[string][]byte{"b.yaml": nil}); err != nil {
		t.Fatal(err)
	}
	d.Close()
	d2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	var keys []string
	d2.ForEach(LastGood, func(k string, v []byte) error {
		keys = append(keys, k+"="+string(v))
		return nil
	})
	if fmt.Sprint(keys) != "[a.yaml=A]" {
		t.Errorf("after reopen LastGood = %v, want [a.yaml=A]", keys)
	}
	if v, _ := d2.Get(LastGood, "missing"); v != nil {
		t.Errorf("Get(missing) = %q, want nil", v)
	}
}

func TestWriteSeqKeepsTheNewest(t *testing.T) {
	d, path := openTemp(t)
	for i := range 10 {
		if err := d.WriteSeq(Events, map[uint64][]byte{uint64(i + 1): []byte(fmt.Sprint(i))}, 4); err != nil {
			t.Fatal(err)
		}
	}
	// One batch: a put, a delete of a kept entry, a delete of one gone.
	if err := d.WriteSeq(Events, map[uint64][]byte{11: []byte("x"), 9: nil, 2: nil}, 4); err != nil {
		t.Fatal(err)
	}
	var got []string
	d.ForEachSeq(Events, func(seq uint64, v []byte) error {
		got = append(got, fmt.Sprintf("%d:%s", seq, v))
		return nil
	})
	if fmt.Sprint(got) != "[7:6 8:7 10:9 11:x]" {
		t.Errorf("events = %v, want the newest 4 but the deleted one", got)
	}
	// Deleting the highest never takes the sequence back, across a reopen.
	if err := d.WriteSeq(Events, map[uint64][]byte{11: nil}, 4); err != nil {
		t.Fatal(err)
	}
	d.Close()
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if seq, err := d.Sequence(Events); err != nil || seq != 11 {
		t.Errorf("sequence = %d, %v; want 11", seq, err)
	}
}

func TestOpenRefusesAForeignDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucket([]byte("someone-elses"))
		return err
	})
	db.Close()
	if _, err := Open(path); !errors.Is(err, ErrSchema) {
		t.Fatalf("Open(foreign) = %v, want ErrSchema", err)
	}
}

func TestOpenRefusesASecondOpener(t *testing.T) {
	_, path := openTemp(t)
	if _, err := Open(path); !errors.Is(err, ErrInUse) {
		t.Fatalf("second Open = %v, want ErrInUse", err)
	}
}
