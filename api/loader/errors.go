package loader

import (
	"errors"
	"strconv"
	"strings"
)

// Classes of load errors. Every *Error wraps exactly one of them, so callers
// branch with errors.Is; a read error also wraps the error of the file
// system (errors.Is(err, fs.ErrNotExist) for a file that vanished).
var (
	// ErrRead is returned when a file cannot be opened or read, or is not
	// a regular file.
	ErrRead = errors.New("cannot read file")
	// ErrTooLarge is returned for a file over MaxFileSize.
	ErrTooLarge = errors.New("file too large")
	// ErrEncoding is returned for a file that is not UTF-8 text: an
	// invalid byte sequence or a control character YAML forbids.
	ErrEncoding = errors.New("invalid text")
	// ErrSyntax is returned for a YAML or JSON syntax error.
	ErrSyntax = errors.New("syntax error")
	// ErrNotObject is returned for a document that is not one object: a
	// sequence or scalar at the top, kind List, or an apiVersion or kind
	// this version does not serve.
	ErrNotObject = errors.New("not an object")
	// ErrUnknownField is returned for a key the API does not define.
	ErrUnknownField = errors.New("unknown field")
	// ErrDuplicateKey is returned for a key written twice in one mapping.
	ErrDuplicateKey = errors.New("duplicate key")
	// ErrType is returned for a value of the wrong type, such as a string
	// where an integer belongs, or an integer beyond 64 bits.
	ErrType = errors.New("wrong type")
	// ErrAlias is returned for YAML aliases that expand beyond the bound,
	// and for merge keys ("<<"), which are not supported.
	ErrAlias = errors.New("alias not allowed")
	// ErrReadOnly is returned for a field that only marshald writes
	// (status, metadata.generation) declared in a manifest.
	ErrReadOnly = errors.New("field is written by marshald")
	// ErrInvalid is returned for a value the object's validation refuses,
	// including a missing metadata.name.
	ErrInvalid = errors.New("invalid value")
	// ErrConflict is returned by Merge on every declaration of an object
	// (same kind and name) declared more than once. It does not make the
	// files fail: the first declaration is used.
	ErrConflict = errors.New("declared more than once")
	// ErrHostSingleton is returned by Merge on every Host after the first:
	// at most one Host may be declared. It does not make the file fail.
	ErrHostSingleton = errors.New("more than one Host")
	// ErrSymlink is returned by LoadDir for a symlink it will not follow:
	// one that leaves the config directory, loops, or dangles.
	ErrSymlink = errors.New("symlink not followed")
)

// Error is one load error: where it is (file, line, object, field path) and
// what is wrong. Parts that are unknown are empty or zero.
type Error struct {
	// File is the path of the file, as the caller named it.
	File string `json:"file"`
	// Line is the 1-based line of the offending key or list element, or 0
	// when the error concerns the whole file.
	Line int `json:"line,omitempty"`
	// Kind is the object's kind, when the document names a served kind.
	Kind string `json:"kind,omitempty"`
	// Name is the object's metadata.name, when known.
	Name string `json:"name,omitempty"`
	// Field is the path of the offending field, as spec.exec.argv0[2].
	Field string `json:"field,omitempty"`
	// Message says what is wrong.
	Message string `json:"message"`

	// class is the sentinel the error wraps, possibly joined with a cause.
	class error
}

// Error formats e as FILE:LINE: KIND "NAME": field.path: message, leaving
// out the parts that are unknown.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Kind != "" || e.Name != "" {
		b.WriteString(e.Kind)
		if e.Name != "" {
			if e.Kind != "" {
				b.WriteByte(' ')
			}
			b.WriteString(strconv.Quote(e.Name))
		}
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// Unwrap returns the class of the error (one of the Err variables), joined
// with the file system's error for ErrRead.
func (e *Error) Unwrap() error { return e.class }
