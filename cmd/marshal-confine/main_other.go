//go:build !linux || !cgo

// Without Linux and cgo, marshal-confine refuses every launch.

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintf(os.Stderr, "ISOLATION_UNSUPPORTED: netns isolation unavailable: marshal-confine was built without Linux and cgo\nattempt -, process %d, state cancelled; nothing was started\n", os.Getpid())
	os.Exit(78)
}
