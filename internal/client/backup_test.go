package client

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/internal/localapi"
)

func TestBackupTo(t *testing.T) {
	journal := bytes.Repeat([]byte("bbolt page\x00"), 50000)
	handlers := map[string]http.Handler{
		"/whole": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.ServeContent(w, r, "admission.db", time.Time{}, bytes.NewReader(journal))
		}),
		"/whole-chunked": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			for rest := journal; len(rest) > 0; {
				n := min(len(rest), 4096)
				w.Write(rest[:n])
				rest = rest[n:]
			}
		}),
		"/length-cut-short": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "1000")
			w.Write(journal[:10])
		}),
		"/chunked-cut-short": raw("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\na\r\n0123456789\r\n10\r\n01234"),
		"/failed": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(`{"code":"INTERNAL","message":"the backup failed; marshald's log has the cause"}`))
		}),
	}
	// client serves the backup with the handler of route.
	client := func(t *testing.T, route string) *Client {
		mux := http.NewServeMux()
		mux.Handle("GET "+localapi.BackupPath, handlers[route])
		return New(serve(t, mux))
	}

	tests := []struct {
		route string
		want  string // in the error; "" for success
	}{
		{route: "/whole"},
		{route: "/whole-chunked"},
		{route: "/length-cut-short", want: "the backup ended after 10 of 1000 bytes"},
		{route: "/chunked-cut-short", want: "the backup ended after 15 bytes, before its end"},
		{route: "/failed", want: "the backup failed; marshald's log has the cause"},
	}
	for _, tc := range tests {
		t.Run(strings.ReplaceAll(strings.Trim(tc.route, "/"), "-", "_"), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "backup.db")
			n, err := client(t, tc.route).BackupTo(t.Context(), path)
			entries, _ := os.ReadDir(dir)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) || n != 0 || len(entries) != 0 {
					t.Errorf("BackupTo = %d, %v, leaving %d files; want 0, an error with %q, no file", n, err, len(entries), tc.want)
				}
				return
			}
			got, rerr := os.ReadFile(path)
			if err != nil || n != int64(len(journal)) || !bytes.Equal(got, journal) || len(entries) != 1 {
				t.Errorf("BackupTo = %d, %v, wrote %d bytes (%v) in %d files; want %d bytes in one file",
					n, err, len(got), rerr, len(entries), len(journal))
			}
		})
	}

	t.Run("refuses_an_existing_file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "backup.db")
		if err := os.WriteFile(path, []byte("keep"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := client(t, "/whole").BackupTo(t.Context(), path); err == nil || !strings.Contains(err.Error(), "choose a new file") {
			t.Errorf("BackupTo over a file = %v, want a refusal", err)
		}
		if got, _ := os.ReadFile(path); string(got) != "keep" {
			t.Errorf("the existing file holds %q, want it kept", got)
		}
	})

	t.Run("failure_is_an_api_error", func(t *testing.T) {
		_, err := client(t, "/failed").BackupTo(t.Context(), filepath.Join(t.TempDir(), "backup.db"))
		var apiErr *localapi.Error
		if !errors.As(err, &apiErr) || apiErr.Code != localapi.CodeInternal {
			t.Errorf("BackupTo = %v, want an INTERNAL *localapi.Error", err)
		}
	})
}
