// Command marshal-confine runs a netns agent: the launching process, in its
// scope, execs it in place of the agent, and it makes a user and a
// network namespace that has only loopback, starts the bridge to the
// egress proxy's unix socket inside them, with its resolver on
// 127.0.0.1:53 named by the agent's /etc/resolv.conf (a mount of the
// agent's own), and execs the agent (see confine.c). The same binary is the bridge (package bridge).
//
//	marshal-confine exec [--network none|host] [--socket PATH] [--port N] [--attempt ID] [--argv0 NAME] [--output json]
//	                     [--fs-default read|none] [--fs ACCESS:PATH]... [--tmp PATH] [--hide PATH]... -- PROGRAM [ARG...]
//	marshal-confine check [--fs]
//
// Without --socket there is no bridge and no way out at all. Each --hide
// path (marshald gives the host's services' sockets) is hidden in a
// mount namespace of the agent's own, so that no service that acts for
// whoever connects takes the agent out of its namespace. The --fs flags
// confine its files and local sockets too (see fs.c). check makes
// the namespaces and exits 0 when netns isolation is available to the
// user here; otherwise it, like exec, says why and exits 78.
//
// What it does before the Go runtime starts is C, so it needs Linux and
// cgo; built without them it refuses every launch.
package main
