// Package rawfile reads and writes small files, the kernel's interface
// files (cgroupfs, /proc) and the daemon's own, once each, with the
// system calls alone. os.File would add a poller registration attempt,
// five more system calls and allocations to each open: more than the
// read or write itself, and a third of the cost of creating a scope.
package rawfile
