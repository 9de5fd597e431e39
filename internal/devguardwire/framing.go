package devguardwire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// The bounds of DevGuard's transport, which hello states and clients
// check exactly.
const (
	// MaxFrameBytes is the largest frame payload.
	MaxFrameBytes = 64 * 1024
	// FrameDeadline bounds the read or the write of one whole frame,
	// idle waiting before it included.
	FrameDeadline = 250 * time.Millisecond
	// MaxSessions is how many sessions are served at once; more are
	// closed at once.
	MaxSessions = 32
)

// frameHeader is the size of a frame's length prefix.
const frameHeader = 4

// readFrame reads one frame from r: a 4-byte big-endian length N, then N
// bytes. buf is reused when it is large enough. A length of 0 or above
// MaxFrameBytes is ErrFrameSize, and nothing more is read; a stream that
// ends between two frames is io.EOF, inside one io.ErrUnexpectedEOF.
func readFrame(r io.Reader, buf []byte) ([]byte, error) {
	var h [frameHeader]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n == 0 || n > MaxFrameBytes {
		return nil, fmt.Errorf("frame of %d bytes: %w", n, ErrFrameSize)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// appendFrame appends payload to dst as one frame.
func appendFrame(dst, payload []byte) ([]byte, error) {
	if len(payload) == 0 || len(payload) > MaxFrameBytes {
		return nil, fmt.Errorf("frame of %d bytes: %w", len(payload), ErrFrameSize)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)))
	return append(dst, payload...), nil
}

// ReadFrame reads one frame from c, the whole of it, idle waiting
// included, before within passes, and returns its payload, in buf when
// buf is large enough.
func ReadFrame(c net.Conn, buf []byte, within time.Duration) ([]byte, error) {
	if err := c.SetReadDeadline(time.Now().Add(within)); err != nil {
		return nil, err
	}
	return readFrame(c, buf)
}

// WriteFrame writes payload to c as one frame, the whole of it before
// within passes.
func WriteFrame(c net.Conn, payload []byte, within time.Duration) error {
	frame, err := appendFrame(make([]byte, 0, frameHeader+len(payload)), payload)
	if err != nil {
		return err
	}
	if err := c.SetWriteDeadline(time.Now().Add(within)); err != nil {
		return err
	}
	_, err = c.Write(frame)
	return err
}
