// Command marshal-devguard-launch is DevGuard's launch helper on Linux:
// see package devguardlaunch.
package main

import (
	"os"

	"github.com/marshal-dev/marshal/internal/devguardlaunch"
)

func main() { os.Exit(devguardlaunch.Main(os.Args[1:])) }
