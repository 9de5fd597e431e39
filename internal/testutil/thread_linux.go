package testutil

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// GoOffMainThread runs fn in a new goroutine locked to an OS thread that
// is not the process's main thread, and returns at once. fn may change
// what its thread is in (enter a namespace) and leave it locked: the
// runtime then ends the thread with the goroutine.
//
// The main thread is kept out because the kernel answers for the process
// from it: /proc/<pid>/ns/net and a pidfd's namespace are the main
// thread's, and the runtime never ends that thread, so a namespace left
// there moves the whole test process for every peer check marshald makes
// of its connections.
func GoOffMainThread(fn func()) {
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			fn()
			return
		}
		// Held by this goroutine, the main thread cannot run the next.
		done := make(chan struct{})
		GoOffMainThread(func() {
			defer close(done)
			fn()
		})
		<-done
		runtime.UnlockOSThread()
	}()
}
