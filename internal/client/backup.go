package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"

	"github.com/marshal-dev/marshal/internal/localapi"
)

// BackupTo writes a consistent copy of marshald's admission journal to
// path, atomically: a temporary file beside it, synced, then renamed. It
// refuses to overwrite an existing file. It returns the bytes written.
func (c *Client) BackupTo(ctx context.Context, path string) (int64, error) {
	if _, err := os.Lstat(path); err == nil {
		return 0, fmt.Errorf("%s exists: choose a new file", path)
	}
	resp, err := c.request(ctx, http.MethodGet, localapi.BackupPath, nil, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name())
	n, err := io.Copy(tmp, resp.Body)
	if err == nil && resp.ContentLength >= 0 && n != resp.ContentLength {
		err = fmt.Errorf("the backup ended after %d of %d bytes", n, resp.ContentLength)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("writing %s: %w", path, err)
	}
	// Link, not rename: it fails rather than replace a file that appeared
	// meanwhile.
	if err := os.Link(tmp.Name(), path); err != nil {
		return 0, fmt.Errorf("writing %s: %w", path, err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return n, nil
}
