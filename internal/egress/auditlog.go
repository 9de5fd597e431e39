package egress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// Defaults of LogOptions.
const (
	// DefaultLogMaxBytes is the size at which the audit log is rotated.
	DefaultLogMaxBytes = 16 << 20
	// DefaultLogKeep is how many rotated files are kept besides the one
	// written.
	DefaultLogKeep = 4
)

// LogFile is the name of the audit log in its directory; rotated files
// are LogFile.1 (the newest) to LogFile.<keep>.
const LogFile = "audit.log"

// maxLine bounds one line read back: a record is far smaller.
const maxLine = 64 << 10

// LogOptions configure an audit Log.
type LogOptions struct {
	// MaxBytes rotates the file once it would grow past it.
	MaxBytes int64
	// Keep is how many rotated files are kept.
	Keep int
	// Logger receives write failures; discarded by default.
	Logger *slog.Logger
}

// Log is the audit log: one JSON line per decision, appended to a file
// in its directory and rotated by size. Lines are written whole with one
// write each and without fsync: the log outlives a crash of marshald, as
// the page cache does, not a power loss. It is safe for concurrent use.
type Log struct {
	dir  string
	opts LogOptions
	log  *slog.Logger

	// mu guards the fields that follow.
	mu   sync.Mutex
	f    *os.File
	size int64
	// rotations counts rotations, so a follower knows to reopen.
	rotations uint64
	// changed is closed, and replaced, at every write.
	changed chan struct{}
	// failing is set while writes fail, so a failure is logged once.
	failing bool
	closed  bool
}

var _ Auditor = (*Log)(nil)

// OpenLog opens, creating it when missing, the audit log in dir.
func OpenLog(dir string, opts LogOptions) (*Log, error) {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultLogMaxBytes
	}
	if opts.Keep <= 0 {
		opts.Keep = DefaultLogKeep
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("egress audit log: %w", err)
	}
	l := &Log{dir: dir, opts: opts, log: opts.Logger, changed: make(chan struct{})}
	if err := l.openLocked(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *Log) path(n int) string {
	if n == 0 {
		return filepath.Join(l.dir, LogFile)
	}
	return filepath.Join(l.dir, LogFile+"."+strconv.Itoa(n))
}

func (l *Log) openLocked() error {
	f, err := os.OpenFile(l.path(0), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("egress audit log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("egress audit log: %w", err)
	}
	l.f, l.size = f, fi.Size()
	return nil
}

// Audit appends rec as one line.
func (l *Log) Audit(rec *Record) {
	line, err := json.Marshal(rec)
	if err != nil {
		l.log.Error("egress audit log: encoding a record", "err", err)
		return
	}
	line = append(line, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if l.size > 0 && l.size+int64(len(line)) > l.opts.MaxBytes {
		if err := l.rotateLocked(); err != nil {
			l.failedLocked(err)
			if l.f == nil {
				return
			}
		}
	}
	n, err := l.f.Write(line)
	l.size += int64(n)
	if err != nil {
		l.failedLocked(err)
	} else if l.failing {
		l.failing = false
		l.log.Info("egress audit log: writing again")
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *Log) failedLocked(err error) {
	if !l.failing {
		l.failing = true
		l.log.Error("egress audit log: records are being lost", "err", err)
	}
}

// rotateLocked shifts the rotated files up by one, dropping the oldest,
// moves the current file to LogFile.1 and opens a new one.
func (l *Log) rotateLocked() error {
	l.f.Close()
	l.f = nil
	for n := l.opts.Keep; n > 1; n-- {
		if err := os.Rename(l.path(n-1), l.path(n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := os.Rename(l.path(0), l.path(1)); err != nil {
		return err
	}
	l.rotations++
	return l.openLocked()
}

// Close closes the log; later records are dropped.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	close(l.changed)
	l.changed = make(chan struct{})
	if l.f == nil {
		return nil
	}
	return l.f.Close()
}

// Read calls fn with every line kept, oldest first, then caughtUp (when
// not nil), then, when follow, fn with each line written later, until ctx
// ends or a callback returns an error, which Read returns; fn must not
// keep line. A follower that falls more than a whole rotation behind
// misses the lines of the files rotated away meanwhile.
func (l *Log) Read(ctx context.Context, follow bool, fn func(line []byte) error, caughtUp func() error) error {
	l.mu.Lock()
	var files []*os.File
	for n := l.opts.Keep; n >= 0; n-- {
		f, err := os.Open(l.path(n))
		if err == nil {
			files = append(files, f)
		}
	}
	rotations := l.rotations
	l.mu.Unlock()
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if len(files) == 0 {
		return fmt.Errorf("egress audit log: %s cannot be read", l.path(0))
	}
	for _, f := range files[:len(files)-1] {
		if err := readLines(f, &lineBuffer{}, fn); err != nil {
			return err
		}
	}
	cur := files[len(files)-1]
	var rest lineBuffer
	for {
		l.mu.Lock()
		changed, closed := l.changed, l.closed
		rotated := l.rotations != rotations
		var next *os.File
		if rotated {
			next, _ = os.Open(l.path(0))
			rotations = l.rotations
		}
		l.mu.Unlock()
		// What the file held when it was looked at, to its end; after a
		// rotation, the old file is whole.
		if err := readLines(cur, &rest, fn); err != nil {
			if next != nil {
				next.Close()
			}
			return err
		}
		if next != nil {
			files = append(files, next)
			cur, rest = next, lineBuffer{}
			continue
		}
		if caughtUp != nil {
			if err := caughtUp(); err != nil {
				return err
			}
			caughtUp = nil
		}
		if !follow || closed {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}

// lineBuffer holds the start of a line not yet written whole.
type lineBuffer struct{ b []byte }

// readLines reads f from where it is to its end, calling fn with every
// whole line; a partial last line waits in rest for the next read.
func readLines(f *os.File, rest *lineBuffer, fn func([]byte) error) error {
	buf := make([]byte, 32<<10)
	for {
		n, err := f.Read(buf)
		data := buf[:n]
		for len(data) > 0 {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				if len(rest.b)+len(data) <= maxLine {
					rest.b = append(rest.b, data...)
				}
				break
			}
			line := data[:i]
			if len(rest.b) > 0 {
				line = append(rest.b, line...)
				rest.b = rest.b[:0]
			}
			if len(line) > 0 {
				if err := fn(line); err != nil {
					return err
				}
			}
			data = data[i+1:]
		}
		if errors.Is(err, io.EOF) || n == 0 && err == nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("egress audit log: %w", err)
		}
	}
}
