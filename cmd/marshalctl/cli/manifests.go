package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/marshal-dev/marshal/api/loader"
	"github.com/marshal-dev/marshal/internal/localapi"
)

// stdinName names standard input in messages and requests.
const stdinName = "<stdin>"

// manifests are the files named by -f, read and loaded.
type manifests struct {
	// Files are the files' contents, to send.
	Files []localapi.ApplyFile
	// Objects are the objects they declare, loaded and defaulted.
	Objects []loader.Object
	// Errors are their load errors, conflicts between them included.
	Errors []localapi.ManifestError
}

// readManifests reads every path (a file, a directory searched as
// marshald searches its config dir, or - for stdin) and loads the files
// strictly, merging them so an object declared twice is caught. It fails
// only when a path cannot be read; load errors are in the result.
func readManifests(ctx context.Context, stdin io.Reader, paths []string) (*manifests, error) {
	m := &manifests{}
	var loaded []loader.File
	add := func(name string, data []byte) {
		m.Files = append(m.Files, localapi.ApplyFile{Name: name, Data: data})
		loaded = append(loaded, loader.LoadInput(name, data))
	}
	for _, p := range paths {
		if p == "-" {
			data, err := io.ReadAll(io.LimitReader(stdin, loader.MaxFileSize+1))
			if err != nil {
				return nil, fmt.Errorf("reading standard input: %w", err)
			}
			add(stdinName, data)
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			data, err := readBounded(p)
			if err != nil {
				return nil, err
			}
			add(p, data)
			continue
		}
		// The loader decides which files of a directory count, exactly as
		// marshald does; then each is read to be sent.
		res, err := loader.LoadDir(ctx, p)
		if err != nil {
			return nil, err
		}
		for _, f := range res.Files {
			if unreadable(f) {
				loaded = append(loaded, f)
				continue
			}
			data, err := readBounded(f.Path)
			if err != nil {
				return nil, err
			}
			add(f.Path, data)
		}
	}
	merged := loader.Merge(loaded)
	m.Objects = merged.Objects
	for _, e := range merged.Errors {
		m.Errors = append(m.Errors, localapi.ManifestError{
			File: e.File, Line: e.Line, Kind: e.Kind, Name: e.Name, Field: e.Field, Message: e.Message,
		})
	}
	return m, nil
}

// unreadable reports whether the loader could not read f at all: a link
// it will not follow, a file it cannot open.
func unreadable(f loader.File) bool {
	for _, e := range f.Errors {
		if errors.Is(e, loader.ErrRead) || errors.Is(e, loader.ErrSymlink) {
			return true
		}
	}
	return false
}

// readBounded reads at most one byte more than a manifest may hold, so
// the loader reports a file that is too large.
func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, loader.MaxFileSize+1))
}
