package testutil

import (
	"os"
	"testing"
)

// ShortDir is a fresh directory, removed when t ends, short enough to
// hold unix sockets. A socket's path must fit sun_path (108 bytes), which
// t.TempDir() can exceed: it carries the test's name, below a $TMPDIR
// that may itself be long.
func ShortDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "m")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
