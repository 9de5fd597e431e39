// Command golaunch starts its arguments in a new cgroup of their own, the
// kernel's share of a launch with nothing else around it: the floor under
// marshal's.
//
//	golaunch move PARENT ARGV...   make a group under PARENT, move itself
//	                               into it and exec ARGV, as marshal's
//	                               launch does
//	golaunch clone PARENT ARGV...  make a group under PARENT and start ARGV
//	                               in it with CLONE_INTO_CGROUP, then wait
//
// The groups are left for the caller to remove.
package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
)

func main() {
	if len(os.Args) < 4 {
		os.Exit(2)
	}
	how, parent, argv := os.Args[1], os.Args[2], os.Args[3:]
	group := filepath.Join(parent, "launch-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(group, 0o755); err != nil {
		fail(err)
	}
	switch how {
	case "move":
		if err := os.WriteFile(filepath.Join(group, "cgroup.procs"), []byte("0"), 0); err != nil {
			fail(err)
		}
		fail(syscall.Exec(argv[0], argv, os.Environ()))
	case "clone":
		dir, err := os.Open(group)
		if err != nil {
			fail(err)
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(dir.Fd())}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		err = cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			os.Exit(exit.ExitCode())
		}
		if err != nil {
			fail(err)
		}
	default:
		os.Exit(2)
	}
}

func fail(err error) {
	os.Stderr.WriteString("golaunch: " + err.Error() + "\n")
	os.Exit(1)
}
