package applier

import "errors"

var (
	// ErrNoConfigDir is returned when the config dir does not exist or is
	// not a directory; nothing is written then.
	ErrNoConfigDir = errors.New("config dir missing")
	// ErrOutsideDir is returned when Declarations name a file that is not
	// inside the config dir, or a path to write, remove or read resolves
	// outside it (a symlink leaving it): nothing is touched there.
	ErrOutsideDir = errors.New("file outside the config dir")
)
