package client

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	var n int64
	err := c.request(ctx, methodGet, localapi.BackupPath, nil, nil, func(resp *Response) error {
		tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
		if err != nil {
			return err
		}
		defer os.Remove(tmp.Name())
		n, err = io.Copy(tmp, resp.Body)
		switch {
		case errors.Is(err, io.ErrUnexpectedEOF) && resp.ContentLength >= 0:
			err = fmt.Errorf("the backup ended after %d of %d bytes", n, resp.ContentLength)
		case errors.Is(err, io.ErrUnexpectedEOF):
			err = fmt.Errorf("the backup ended after %d bytes, before its end", n)
		case err == nil:
			err = tmp.Sync()
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			// Link, not rename: it fails rather than replace a file that
			// appeared meanwhile.
			err = os.Link(tmp.Name(), path)
		}
		switch {
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			return fmt.Errorf("writing %s: %w", path, err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return n, nil
}
