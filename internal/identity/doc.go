// Package identity answers "which marshal launch is this process?" from
// the kernel alone: it reads the process's cgroup path from
// /proc/<pid>/cgroup and parses the scope name in it (see package scope).
// Nothing is registered or cached, so the answer cannot drift from the
// cgroup tree: a process belongs to a launch exactly while it is in that
// launch's scope, and every process the agent forks, at any depth and in
// any sub-group it makes, resolves to the same launch.
//
// Resolve reads the cgroup2 ("0::") line, and on a hybrid or legacy host
// also systemd's named v1 hierarchy ("name=systemd"), where systemd keeps
// its scopes. OpenNetNS and SelfNetNS name a process's network
// namespace. Who is at the other end of a socket is package peer's
// question, answered with these.
//
// It is not an authorization layer and it does not touch the cgroup tree:
// callers decide what an identity allows, and the cgroup backends create
// and remove scopes.
package identity
