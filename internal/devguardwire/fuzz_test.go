package devguardwire

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"testing"
)

// FuzzReadFrame reads frames from any bytes: each frame it returns is
// 1 to MaxFrameBytes long and the bytes after its header; it stops with
// io.EOF only between frames, and otherwise with ErrFrameSize or
// io.ErrUnexpectedEOF.
func FuzzReadFrame(f *testing.F) {
	f.Add(frameBytes(2, []byte("{}")))
	f.Add(append(frameBytes(1, []byte("{")), frameBytes(0, nil)...))
	f.Add(frameBytes(MaxFrameBytes+1, nil))
	f.Add([]byte{0, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		off := 0
		for {
			frame, err := readFrame(r, nil)
			if err != nil {
				switch {
				case errors.Is(err, io.EOF):
					if off != len(data) {
						t.Fatalf("io.EOF at %d of %d bytes", off, len(data))
					}
				case errors.Is(err, ErrFrameSize):
					n := binary.BigEndian.Uint32(data[off:])
					if n != 0 && n <= MaxFrameBytes {
						t.Fatalf("a frame of %d bytes refused", n)
					}
				case !errors.Is(err, io.ErrUnexpectedEOF):
					t.Fatalf("readFrame: %v", err)
				}
				return
			}
			if len(frame) == 0 || len(frame) > MaxFrameBytes || !bytes.Equal(frame, data[off+4:off+4+len(frame)]) {
				t.Fatalf("frame at %d is not the bytes after its header", off)
			}
			off += 4 + len(frame)
		}
	})
}

// FuzzDecodeRequest decodes any frame: it never panics, refuses with
// ErrMalformed alone, and accepts only JSON that encoding/json reads as
// valid too, with a known method.
func FuzzDecodeRequest(f *testing.F) {
	for _, body := range []string{
		`{"method":"status"}`,
		`{"method":"hello","params":{"compatibility":{"minimum_protocol":1,"maximum_protocol":1,"required":["durable_admission"]}}}`,
		`{"method":"authenticate","params":{"credential":{"kind":"consumer","consumer_id":"codespace","generation":"g1","secret":"` + secretA + `"}}}`,
		`{"method":"register","params":{"instance_id":"codespace-1"}}`,
		`{"method":"admit","params":{"request":` + admissionJSON + `}}`,
		`{"method":"abandon_launch","params":{"key":` + keyJSON + `,"reason":"spawn_failed"}}`,
		`{"method":"launch","params":{"key":` + keyJSON + `,"instance_id":"i","permit":"` + secretA + `"}}`,
		`{"method":"admit_lease","params":{"key":` + keyJSON + `,"budget":{"cpu_milli":1,"memory_bytes":2,"tasks":3},"ttl_ms":null}}`,
	} {
		f.Add([]byte(frameOf(body)))
	}
	f.Add([]byte(`{"version":1,"version":1}`))
	f.Add([]byte(`"\ud800"`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeRequest(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("DecodeRequest = %v, not ErrMalformed", err)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted JSON that encoding/json refuses: %q", data)
		}
		if r.Method == "" {
			t.Fatal("accepted a request without a method")
		}
		again, err := DecodeRequest(data)
		if err != nil || again.Method != r.Method || again.ID != r.ID || again.Key != r.Key {
			t.Fatalf("decoding again = %+v, %v; want %+v", again, err, r)
		}
	})
}
