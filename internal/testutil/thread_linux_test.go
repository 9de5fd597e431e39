package testutil

import (
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// However many run at once, none runs on the main thread, and a
// namespace one leaves on its thread never becomes the process's.
func TestGoOffMainThread(t *testing.T) {
	var before unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &before); err != nil {
		t.Skipf("no network namespace to read: %v", err)
	}
	unshare := unix.Geteuid() == 0
	var wg sync.WaitGroup
	onMain := make(chan int, 64)
	for range 64 {
		wg.Add(1)
		GoOffMainThread(func() {
			defer wg.Done()
			if tid := unix.Gettid(); tid == unix.Getpid() {
				onMain <- tid
			}
			if unshare {
				// Left locked: the thread ends in its namespace.
				if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
					t.Errorf("unshare: %v", err)
				}
			}
		})
	}
	wg.Wait()
	close(onMain)
	for tid := range onMain {
		t.Errorf("fn ran on the main thread (%d)", tid)
	}
	var after unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &after); err != nil {
		t.Fatal(err)
	}
	if after.Ino != before.Ino {
		t.Errorf("the process's network namespace is %d after, %d before", after.Ino, before.Ino)
	}
}
