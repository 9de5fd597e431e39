package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// ConfineBuildFlags are the go build flags of marshal-confine, as make build
// gives them: with cgo (its start is C), linked statically (an exec
// without the dynamic loader is faster), and with the pure Go resolver
// and user lookups that a static binary needs.
var ConfineBuildFlags = []string{"-tags", "netgo,osusergo", "-ldflags", "-linkmode external -extldflags -static"}

// BuildConfine builds marshal-confine into dir and returns its path.
func BuildConfine(dir string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "marshal-confine")
	args := append([]string{"build", "-o", out}, ConfineBuildFlags...)
	cmd := exec.Command("go", append(args, "./cmd/marshal-confine")...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building marshal-confine: %w\n%s", err, b)
	}
	return out, nil
}
