// Package scope is marshal's naming contract: the names of profile slices
// and launch scopes, and the parser that turns a cgroup path back into the
// identity it registers.
//
// The scope name is the registration. A launch of profile P runs in
// marshal-<esc(P)>-<id>.scope inside marshal-<esc(P)>.slice, where esc is
// systemd unit-name escaping and id is 32 lowercase hex digits. Whoever
// needs to know which profile a process belongs to parses its cgroup path;
// there is no table that could drift from the kernel's.
//
// This package only names and parses; it does not touch the cgroup tree.
package scope
