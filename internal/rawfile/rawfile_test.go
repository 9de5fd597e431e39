package rawfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteThenRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "record")
	if err := Write(path, []byte("first, longer"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("second"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil || string(got) != "second" {
		t.Fatalf("Read = %q, %v; want the last write whole, %q", got, err, "second")
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("created with %v (%v), want 0600", fi.Mode().Perm(), err)
	}
}

func TestMissingFileIsNotExist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing")
	var pe *fs.PathError
	if _, err := Read(path); !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) || pe.Path != path {
		t.Errorf("Read of a missing file = %v, want a PathError naming it that is fs.ErrNotExist", err)
	}
	if err := Write(path, []byte("x"), os.O_WRONLY|os.O_TRUNC, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Write without O_CREATE to a missing file = %v, want fs.ErrNotExist", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a Write without O_CREATE made the file: %v", err)
	}
}

// A file larger than the first buffer is read whole.
func TestReadGrowsItsBuffer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big")
	want := make([]byte, 70000)
	for i := range want {
		want[i] = byte('a' + i%26)
	}
	if err := os.WriteFile(path, want, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil || string(got) != string(want) {
		t.Fatalf("Read = %d bytes, %v; want all %d", len(got), err, len(want))
	}
}

// BenchmarkReadProcStat reads /proc/self/stat, as a launch does for its
// caller's start time, with Read and with os.ReadFile.
func BenchmarkReadProcStat(b *testing.B) {
	for _, r := range []struct {
		name string
		read func(string) ([]byte, error)
	}{{"rawfile", Read}, {"os", os.ReadFile}} {
		b.Run(r.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := r.read("/proc/self/stat"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
