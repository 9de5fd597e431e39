package cgroup

import (
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"
)

// readFile and writeFile use the system calls directly: an interface file
// is opened, read or written once and closed, and os.File would add a
// poller registration attempt and allocations to each, a third of the
// cost of creating a scope.

func readFile(path string) ([]byte, error) {
	fd, err := openRetrying(path, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return readFD(fd, path)
}

// readFD reads the interface file open at fd to its end.
func readFD(fd int, path string) ([]byte, error) {
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

func writeFile(path, value string) error {
	// O_TRUNC is ignored by cgroupfs and makes the same call work on a
	// regular file standing in for a group in tests.
	fd, err := openRetrying(path, unix.O_WRONLY|unix.O_TRUNC)
	if err != nil {
		return err
	}
	for {
		_, err = unix.Write(fd, []byte(value))
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

// ioError is the error of a read or write of an interface file. The
// kernel answers ENODEV when the file's group was removed after the file
// was opened: to callers that is the group gone, as ENOENT at open is.
func ioError(op, path string, err error) error {
	if errors.Is(err, unix.ENODEV) {
		err = fmt.Errorf("%w (%w)", fs.ErrNotExist, err)
	}
	return &fs.PathError{Op: op, Path: path, Err: err}
}

func openRetrying(path string, mode int) (int, error) {
	for {
		fd, err := unix.Open(path, mode|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		return fd, nil
	}
}
