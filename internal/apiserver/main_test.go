package apiserver_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// getEnv, when set, makes the test binary a client for the peer tests: it
// GETs the path in $APISERVER_TEST_PATH over the unix socket the variable
// names, prints the status code and the body, and exits.
const (
	getEnv  = "APISERVER_TEST_SOCKET"
	pathEnv = "APISERVER_TEST_PATH"
)

// binDir holds a copy of the test binary that other users can run.
var binDir string

func TestMain(m *testing.M) {
	if socket := os.Getenv(getEnv); socket != "" {
		os.Exit(getOnce(socket, os.Getenv(pathEnv)))
	}
	dir, err := os.MkdirTemp("", "apiserver-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

func getOnce(socket, path string) int {
	c := &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", socket)
			},
		},
	}
	resp, err := c.Get("http://marshald" + path)
	if err != nil {
		fmt.Printf("error %v\n", err)
		return 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("%d %s", resp.StatusCode, body)
	return 0
}

// sharedBinary returns a copy of the test binary in a directory every
// user may enter, so a child can run it under another uid.
func sharedBinary(t *testing.T) string {
	t.Helper()
	path := filepath.Join(binDir, "apiserver.test")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}
