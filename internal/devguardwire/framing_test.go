package devguardwire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

func frameBytes(n uint32, payload []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, n), payload...)
}

func TestReadFrameBounds(t *testing.T) {
	full := bytes.Repeat([]byte("x"), MaxFrameBytes)
	tests := []struct {
		name string
		in   []byte
		want []byte
		err  error
	}{
		{"one_byte", frameBytes(1, []byte("{")), []byte("{"), nil},
		{"largest", frameBytes(MaxFrameBytes, full), full, nil},
		{"zero", frameBytes(0, nil), nil, ErrFrameSize},
		{"one_over", frameBytes(MaxFrameBytes+1, full), nil, ErrFrameSize},
		{"huge", frameBytes(1<<32-1, nil), nil, ErrFrameSize},
		{"nothing", nil, nil, io.EOF},
		{"half_a_header", []byte{0, 0}, nil, io.ErrUnexpectedEOF},
		{"short_payload", frameBytes(10, []byte("{}")), nil, io.ErrUnexpectedEOF},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readFrame(bytes.NewReader(tc.in), nil)
			if !errors.Is(err, tc.err) || !bytes.Equal(got, tc.want) {
				t.Fatalf("readFrame = %d bytes, %v; want %d bytes, %v", len(got), err, len(tc.want), tc.err)
			}
		})
	}
}

// An oversized length is refused before its payload is read: nothing
// past the header is consumed.
func TestReadFrameRefusesBeforeReading(t *testing.T) {
	r := bytes.NewReader(frameBytes(MaxFrameBytes+1, []byte("rest")))
	if _, err := readFrame(r, nil); !errors.Is(err, ErrFrameSize) {
		t.Fatal(err)
	}
	if r.Len() != 4 {
		t.Errorf("%d bytes left unread, want the 4 after the header", r.Len())
	}
}

func TestAppendFrameBounds(t *testing.T) {
	if _, err := appendFrame(nil, nil); !errors.Is(err, ErrFrameSize) {
		t.Errorf("appendFrame(empty) = %v, want ErrFrameSize", err)
	}
	if _, err := appendFrame(nil, make([]byte, MaxFrameBytes+1)); !errors.Is(err, ErrFrameSize) {
		t.Errorf("appendFrame(65537 bytes) = %v, want ErrFrameSize", err)
	}
	f, err := appendFrame(nil, []byte("{}"))
	if err != nil || !bytes.Equal(f, frameBytes(2, []byte("{}"))) {
		t.Errorf("appendFrame = %q, %v", f, err)
	}
}

// The deadline is for the whole frame: a peer that trickles its bytes
// does not extend it.
func TestReadFrameDeadlineCoversTheWholeFrame(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, c := range frameBytes(2, []byte("{}")) {
			select {
			case <-stop:
				return
			case <-time.After(FrameDeadline / 4):
			}
			if _, err := b.Write([]byte{c}); err != nil {
				return
			}
		}
	}()
	start := time.Now()
	_, err := ReadFrame(a, nil, FrameDeadline)
	close(stop)
	// A write to a pipe waits for its reader: one begun after the read
	// gave up returns only once the pipe is closed.
	a.Close()
	<-done
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("ReadFrame of a trickled frame = %v, want a timeout", err)
	}
	if d := time.Since(start); d < FrameDeadline {
		t.Errorf("timed out after %s, before the deadline", d)
	}
}
