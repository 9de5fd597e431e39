package source

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// statFile stamps the file path leads to.
func statFile(path string) (stamp, bool) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return stamp{}, false
	}
	return stamp{
		dev: st.Dev, ino: st.Ino, size: st.Size,
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(),
	}, true
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }
