package rawfile

import (
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"
)

// Read returns the content of the file at path. Errors are
// *fs.PathError with the kernel's errno; a file whose kernel object went
// away while it was open (ENODEV, a cgroup removed mid-read) is an error
// wrapping fs.ErrNotExist too, as a missing one is.
func Read(path string) ([]byte, error) {
	fd, err := open(path, unix.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return ReadFD(fd, path)
}

// ReadFD reads the file open at fd, named path in errors, to its end.
func ReadFD(fd int, path string) ([]byte, error) {
	buf := make([]byte, 0, 256)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, ioError("read", path, err)
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// Write writes data to the file at path, opened with flag (O_WRONLY and
// more) and, when flag creates it, perm, in one write(2): a kernel
// interface file takes a value in one, and a reader of a small file of
// the daemon's sees all of it or none.
func Write(path string, data []byte, flag int, perm uint32) error {
	fd, err := open(path, flag, perm)
	if err != nil {
		return err
	}
	for {
		_, err = unix.Write(fd, data)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	cerr := unix.Close(fd)
	if err != nil {
		return ioError("write", path, err)
	}
	if cerr != nil {
		return &fs.PathError{Op: "close", Path: path, Err: cerr}
	}
	return nil
}

func open(path string, flag int, perm uint32) (int, error) {
	for {
		fd, err := unix.Open(path, flag|unix.O_CLOEXEC, perm)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		return fd, nil
	}
}

// ioError is the error of a read or write. The kernel answers ENODEV when
// the file's object was removed after the file was opened: to callers
// that is the file gone, as ENOENT at open is.
func ioError(op, path string, err error) error {
	if errors.Is(err, unix.ENODEV) {
		err = fmt.Errorf("%w (%w)", fs.ErrNotExist, err)
	}
	return &fs.PathError{Op: op, Path: path, Err: err}
}
