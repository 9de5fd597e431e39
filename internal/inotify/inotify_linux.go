package inotify

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Event is one struct inotify_event.
type Event struct {
	// WD is the watch the event came from.
	WD int32
	// Mask holds the IN_* bits of the event.
	Mask uint32
	// Name is the file inside a watched directory, empty for the
	// directory itself.
	Name string
}

// BufferSize holds a read of 64 events with names of NAME_MAX bytes.
const BufferSize = 64 * (unix.SizeofInotifyEvent + unix.NAME_MAX + 1)

// File is an inotify instance.
type File struct {
	f  *os.File
	fd int
}

// Open returns a new inotify instance.
func Open() (*File, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	// A non-blocking descriptor makes os.NewFile register it with the
	// poller, which is what lets Close and SetReadDeadline end a read.
	return &File{f: os.NewFile(uintptr(fd), "inotify"), fd: fd}, nil
}

// Add watches path for the events of mask and returns the watch. Adding
// a path again returns its watch, with the new mask.
func (f *File) Add(path string, mask uint32) (int32, error) {
	wd, err := unix.InotifyAddWatch(f.fd, path, mask)
	if err != nil {
		if errors.Is(err, unix.ENOSPC) {
			return 0, fmt.Errorf("watching %s: inotify watch limit reached (fs.inotify.max_user_watches): %w", path, err)
		}
		return 0, &os.PathError{Op: "inotify_add_watch", Path: path, Err: err}
	}
	return int32(wd), nil
}

// Remove removes watch wd. The kernel may have removed it already (its
// file is gone), which is not an error.
func (f *File) Remove(wd int32) {
	unix.InotifyRmWatch(f.fd, uint32(wd))
}

// Read blocks until events can be read into buf, which should hold
// BufferSize bytes, and returns how many bytes it read. After Close it
// returns an error wrapping os.ErrClosed.
func (f *File) Read(buf []byte) (int, error) {
	n, err := f.f.Read(buf)
	if err != nil {
		return 0, fmt.Errorf("reading inotify events: %w", err)
	}
	return n, nil
}

// ReadContext is Read that also ends, with ctx.Err(), when ctx does.
func (f *File) ReadContext(ctx context.Context, buf []byte) (int, error) {
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(fired)
		f.f.SetReadDeadline(time.Unix(1, 0))
	})
	n, err := f.Read(buf)
	if !stop() {
		// The deadline was set (or is being set): wait for that
		// goroutine, then report why.
		<-fired
		return 0, ctx.Err()
	}
	return n, err
}

// Close ends the instance, its watches and any Read in progress.
func (f *File) Close() error { return f.f.Close() }

// Decode calls fn for every event in buf, as one read returned it, and
// stops at fn's first error. A read that ends inside an event is
// ErrTruncated.
func Decode(buf []byte, fn func(Event) error) error {
	for len(buf) > 0 {
		if len(buf) < unix.SizeofInotifyEvent {
			return fmt.Errorf("%w: a header of %d bytes", ErrTruncated, len(buf))
		}
		ev := Event{
			WD:   int32(binary.NativeEndian.Uint32(buf[0:4])),
			Mask: binary.NativeEndian.Uint32(buf[4:8]),
		}
		end := unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(buf[12:16]))
		if end > len(buf) {
			return fmt.Errorf("%w: a name cut short", ErrTruncated)
		}
		ev.Name = string(bytes.TrimRight(buf[unix.SizeofInotifyEvent:end], "\x00"))
		if err := fn(ev); err != nil {
			return err
		}
		buf = buf[end:]
	}
	return nil
}
