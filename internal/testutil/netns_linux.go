package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// NetnsBuildFlags are the go build flags of marshal-netns, as make build
// gives them: with cgo (its start is C), linked statically (an exec
// without the dynamic loader is faster), and with the pure Go resolver
// and user lookups that a static binary needs.
var NetnsBuildFlags = []string{"-tags", "netgo,osusergo", "-ldflags", "-linkmode external -extldflags -static"}

// BuildNetns builds marshal-netns into dir and returns its path.
func BuildNetns(dir string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "marshal-netns")
	args := append([]string{"build", "-o", out}, NetnsBuildFlags...)
	cmd := exec.Command("go", append(args, "./cmd/marshal-netns")...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building marshal-netns: %w\n%s", err, b)
	}
	return out, nil
}
