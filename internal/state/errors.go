package state

import "errors"

var (
	// ErrSchema is returned by Open when the file is a bbolt database of
	// another kind or of a schema this version does not know.
	ErrSchema = errors.New("state: unknown schema")
	// ErrInUse is returned by Open when another process holds the file.
	ErrInUse = errors.New("state: in use by another process")
)
