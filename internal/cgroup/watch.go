package cgroup

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/marshal-dev/marshal/internal/scope"
)

// sliceProfile returns the profile whose slice is named name, and false
// when name is not a profile slice name.
func sliceProfile(name string) (string, bool) { return scope.ParseSliceName(name) }

// scopeIn returns the identity of scope name inside profile slice slice,
// and false when name is not a scope of that slice's profile.
func scopeIn(slice, name string) (scope.Identity, bool) {
	id, ok := scope.ParseScopeName(name)
	if !ok || scope.SliceName(id.Profile) != slice {
		return scope.Identity{}, false
	}
	return id, true
}

// relPath returns abs relative to mount, starting with "/".
func relPath(mount, abs string) (string, error) {
	rel, err := filepath.Rel(mount, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("%s is not below the cgroup2 mount %s", abs, mount)
	}
	if rel == "." {
		return "/", nil
	}
	return "/" + rel, nil
}
