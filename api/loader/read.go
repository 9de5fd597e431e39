package loader

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
)

// readFile reads the regular file name, at most MaxFileSize bytes, and
// reports problems against the path report.
func readFile(name, report string, noFollow bool) ([]byte, *Error) {
	f, err := openFile(name, noFollow)
	if err != nil {
		return nil, readError(report, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, readError(report, err)
	}
	if !st.Mode().IsRegular() {
		return nil, &Error{File: report, Message: fmt.Sprintf("not a regular file (%s)", st.Mode().Type()), class: ErrRead}
	}
	if st.Size() > MaxFileSize {
		return nil, tooLarge(report, st.Size())
	}
	// One byte more than the file's size, so a file that grew since the
	// stat is still read to its end (within the limit) in one buffer.
	buf := make([]byte, 0, st.Size()+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := f.Read(buf[len(buf):min(cap(buf), MaxFileSize+1)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, readError(report, err)
		}
		if len(buf) > MaxFileSize {
			return nil, tooLarge(report, int64(len(buf)))
		}
	}
	return buf, nil
}

func readError(report string, err error) *Error {
	msg := err
	var pe *fs.PathError
	if errors.As(err, &pe) {
		msg = pe.Err
	}
	return &Error{File: report, Message: "cannot read: " + msg.Error(), class: fmt.Errorf("%w: %w", ErrRead, err)}
}
