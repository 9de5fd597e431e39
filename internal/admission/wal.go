package admission

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	bolt "go.etcd.io/bbolt"
)

// The write-ahead log.
//
// A bbolt commit syncs twice: its pages, then its meta page. An answer
// needs one sync of what the commit changed, so commits are written to a
// log beside the journal, <journal>.wal, a file of fixed size made
// (zero-filled and synced) before its first use: rewriting blocks a file
// already has needs no metadata of the file system, and the data sync
// writes the entry alone. The journal itself is brought up to date at a
// checkpoint, one bbolt commit of the latest value of everything the log
// holds, when the log is full, before a backup, at Close and at Open,
// which replays first what the log holds.
//
// Each entry starts on a page of its own, so that writing it never
// rewrites a page that holds an entry already answered. It is a header
// (CRC-32C, payload length, sequence) and the payload, the puts of one
// commit. The CRC covers a salt, the length, the sequence and the
// payload; the salt is random, renewed at every checkpoint and stored in
// the journal with the sequence of the last entry the journal holds. An
// entry counts only if it is whole, its CRC holds under the journal's
// salt and its sequence is the next one: a torn write, the zeroes of a
// new log and the entries of an earlier cycle (another salt) all end the
// log, and a journal restored from a backup never takes up the log of
// the one it replaced.
const (
	walSize   = 1 << 20
	walPage   = 4096
	walHeader = 16
	// walSuffix names the log after its journal.
	walSuffix = ".wal"
)

var (
	keyWAL     = []byte("wal")
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

// The buckets a put may name, by the byte that stands for each in the log.
var walBuckets = [...][]byte{1: bucketAttempts, 2: bucketOwners, 3: bucketInstances, 4: bucketMeta}

const (
	walAttempts byte = iota + 1
	walOwners
	walInstances
	walMeta
)

// put is one key set to a value in one of the journal's buckets.
type put struct {
	bucket byte
	key    []byte
	value  []byte
}

func putAll(tx *bolt.Tx, puts []put) error {
	for _, p := range puts {
		if err := tx.Bucket(walBuckets[p.bucket]).Put(p.key, p.value); err != nil {
			return err
		}
	}
	return nil
}

// walState is what the journal says of its log: the salt its entries
// carry and the sequence of the last entry the journal holds.
type walState struct {
	salt uint64
	seq  uint64
}

func newSalt() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

func (s walState) bytes() []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, s.salt), s.seq)
}

func parseWALState(b []byte) (walState, error) {
	if len(b) != 16 {
		return walState{}, fmt.Errorf("log state of %d bytes: %w", len(b), ErrJournalInconsistent)
	}
	return walState{binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:])}, nil
}

// walPending is what the log holds beyond the journal: the latest value
// of every key it set since the last checkpoint.
type walPending map[walKey][]byte

type walKey struct {
	bucket byte
	key    string
}

func (p walPending) add(puts []put) {
	for _, x := range puts {
		p[walKey{x.bucket, string(x.key)}] = x.value
	}
}

func (p walPending) puts() []put {
	out := make([]put, 0, len(p))
	for k, v := range p {
		out = append(out, put{k.bucket, []byte(k.key), v})
	}
	return out
}

// entryLen is the bytes an entry of payload n takes, up to the next page.
func entryLen(n int) int64 {
	return (int64(walHeader+n) + walPage - 1) / walPage * walPage
}

// encodePuts appends the payload of puts to buf.
func encodePuts(buf []byte, puts []put) []byte {
	for _, p := range puts {
		buf = append(buf, p.bucket)
		buf = binary.AppendUvarint(buf, uint64(len(p.key)))
		buf = append(buf, p.key...)
		buf = binary.AppendUvarint(buf, uint64(len(p.value)))
		buf = append(buf, p.value...)
	}
	return buf
}

func decodePuts(payload []byte) ([]put, error) {
	var puts []put
	field := func() ([]byte, bool) {
		n, w := binary.Uvarint(payload)
		if w <= 0 || n > uint64(len(payload)-w) {
			return nil, false
		}
		f := payload[w : w+int(n)]
		payload = payload[w+int(n):]
		return f, true
	}
	for len(payload) > 0 {
		b := payload[0]
		payload = payload[1:]
		if int(b) >= len(walBuckets) || walBuckets[b] == nil {
			return nil, fmt.Errorf("log entry names bucket %d: %w", b, ErrJournalCorrupt)
		}
		k, ok := field()
		if !ok || len(k) == 0 {
			return nil, fmt.Errorf("log entry has a bad key: %w", ErrJournalCorrupt)
		}
		v, ok := field()
		if !ok {
			return nil, fmt.Errorf("log entry has a bad value: %w", ErrJournalCorrupt)
		}
		puts = append(puts, put{b, k, v})
	}
	return puts, nil
}

// sealEntry makes buf (walHeader bytes, then the payload) an entry of
// sequence seq under salt.
func sealEntry(buf []byte, salt, seq uint64) {
	binary.BigEndian.PutUint32(buf[4:], uint32(len(buf)-walHeader))
	binary.BigEndian.PutUint64(buf[8:], seq)
	binary.BigEndian.PutUint32(buf[0:], entryCRC(buf[4:], salt))
}

func entryCRC(afterCRC []byte, salt uint64) uint32 {
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], salt)
	return crc32.Update(crc32.Checksum(s[:], castagnoli), castagnoli, afterCRC)
}

// replayLog returns what the log data holds beyond the journal whose log
// state is st, and the sequence of its last entry (st.seq when none).
func replayLog(data []byte, st walState) (walPending, uint64, error) {
	pending := walPending{}
	seq := st.seq
	for off := int64(0); off+walHeader <= int64(len(data)); {
		h := data[off:]
		n := int64(binary.BigEndian.Uint32(h[4:]))
		if n == 0 || n > int64(len(h))-walHeader || binary.BigEndian.Uint64(h[8:]) != seq+1 ||
			binary.BigEndian.Uint32(h) != entryCRC(h[4:walHeader+n], st.salt) {
			break
		}
		puts, err := decodePuts(h[walHeader : walHeader+n])
		if err != nil {
			return nil, 0, fmt.Errorf("log entry %d: %w", seq+1, err)
		}
		pending.add(puts)
		seq++
		off += entryLen(int(n))
	}
	return pending, seq, nil
}

// readLog reads the log at path; a log that is missing or not a regular
// file holds nothing.
func readLog(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ELOOP) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the journal's log: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, walSize))
	if err != nil {
		return nil, fmt.Errorf("reading the journal's log: %w", err)
	}
	return data, nil
}

// wal is the open log. The writer goroutine alone uses it.
type wal struct {
	f     *os.File
	state walState // the salt of new entries; seq is the last entry's
	off   int64    // where the next entry goes
	buf   []byte
	// reseal makes the next commit a checkpoint: a backup copied the
	// journal with the current salt, and a copy restored in its place
	// must not take up what the log holds after it.
	reseal bool
}

// openLog opens the log at path for the journal whose log state is st,
// which holds every entry: a log of the wrong size or kind is replaced
// by a new one.
func openLog(path string, st walState) (*wal, error) {
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err == nil {
		if info, serr := f.Stat(); serr == nil && info.Mode().IsRegular() && info.Size() == walSize {
			return &wal{f: f, state: st}, nil
		}
		f.Close()
	}
	if f, err = makeLog(path); err != nil {
		return nil, err
	}
	return &wal{f: f, state: st}, nil
}

// makeLog makes a zero-filled, synced log under a temporary name and
// renames it into place.
func makeLog(path string) (*os.File, error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".admission-log-*")
	if err != nil {
		return nil, fmt.Errorf("making the journal's log: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(make([]byte, walSize)); err != nil {
		return nil, fmt.Errorf("making the journal's log: %w", err)
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("making the journal's log: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return nil, fmt.Errorf("making the journal's log: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return nil, fmt.Errorf("making the journal's log: %w", err)
	}
	ok = true
	return f, nil
}

// fits reports whether an entry of payload n fits in what the log has
// left; one that does not fit an empty log never fits.
func (w *wal) fits(n int) bool { return w.off+entryLen(n) <= walSize }

// encode makes puts the payload of the next entry and returns its length.
func (w *wal) encode(puts []put) int {
	w.buf = encodePuts(append(w.buf[:0], make([]byte, walHeader)...), puts)
	return len(w.buf) - walHeader
}

// write writes the entry encode made as the next one and syncs it. On an
// error the entry's outcome is unknown.
func (w *wal) write() error {
	sealEntry(w.buf, w.state.salt, w.state.seq+1)
	if _, err := w.f.WriteAt(w.buf, w.off); err != nil {
		return fmt.Errorf("writing the journal's log: %w", err)
	}
	if err := datasync(w.f); err != nil {
		return fmt.Errorf("syncing the journal's log: %w", err)
	}
	w.state.seq++
	w.off += entryLen(len(w.buf) - walHeader)
	return nil
}
