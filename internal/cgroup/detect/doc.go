// Package detect opens the cgroup backend a host can run: the one asked
// for by name, or, for "auto", systemd when a manager answers on its bus
// and cgroupfs when the cgroup2 mount is writable.
//
// It only chooses and opens; the backends themselves live in
// internal/cgroup/systemd and internal/cgroup/cgroupfs.
package detect
