//go:build !linux

package source

import (
	"os"
	"runtime"
)

// statFile stamps the file path leads to.
func statFile(path string) (stamp, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{}, false
	}
	return stamp{size: fi.Size(), mtime: fi.ModTime().UnixNano()}, true
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }
