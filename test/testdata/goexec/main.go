// Command goexec execs its arguments and does nothing else: what any Go
// program pays to start and to exec, the floor under marshalctl's share
// of a launch.
package main

import (
	"os"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		os.Exit(2)
	}
	syscall.Exec(os.Args[1], os.Args[1:], os.Environ())
	os.Exit(127)
}
