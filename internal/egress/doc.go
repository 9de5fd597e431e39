// Package egress is marshald's egress proxy: it tells which agent is
// talking by the kernel's record of the peer's cgroup, decides each
// connection on the rules of that agent's profile (package policy), and
// carries, refuses and audits it.
//
// One listener serves three protocols, told apart by a connection's
// first byte: 0x05 is SOCKS5 (RFC 1928: CONNECT without authentication;
// BIND and UDP ASSOCIATE are refused), anything else HTTP, served by
// net/http: a forward request with an absolute http:// URI, or CONNECT
// to any port the rules allow. The proxy resolves names itself, decides
// every address the name resolved to, and dials an address it allowed,
// so no later lookup can move the connection elsewhere.
//
// Every request takes one path, whichever its protocol: the protocol's
// front-end (SOCKS5, an HTTP connection's first request, a request the
// HTTP server read) parses it into one request, and handle begins its
// record, decides it, dials it, has the front-end refuse or carry it,
// and audits it.
//
// # Who is talking
//
// Nothing is registered and nothing is kept that a restart could lose:
// each connection is resolved from the kernel to a cgroup path, the path
// through the scope parser (package scope) to a scope's profile and ID,
// and the ID to marshald's record of that launch (workspace, attempt,
// the scope's path). A scope counts only when marshald launched it: a
// group named like a scope with no such launch, of another profile, or
// at another path is no launch's (a Warning event says so), so an agent
// that makes its own marshal-<permissive>-<id>.scope gains nothing. Each
// claim of the launch record is one check (package peer), the last the
// network namespace: a peer counts as a launch's only from the namespace
// that launch was given (Launch.NetNS: the host's, or a netns launch's
// own), so a process of a netns agent that writes itself into another
// launch's scope borrows nothing (UnscopedOtherNetNS, and the record
// names the scope whose namespace it is in). A TCP peer is in the
// listener's namespace, the proxy's own; a unix peer's is read from its
// pidfd. A netns agent reaches the proxy through its bridge (package
// bridge), which is in its scope and namespace.
//
// On the unix socket the peer is the process SO_PEERCRED names, held by
// its pidfd (SO_PEERPIDFD), which the kernel asks for the id of the
// process's cgroup2 group (PIDFD_GET_INFO, Linux 6.13): an id turned
// into a path as a TCP socket's is, below, and no /proc file read, half
// the cost of reading /proc/<pid>/cgroup, which a kernel without that
// ioctl falls back to (package peer).
//
// On TCP loopback there are no peer credentials. The proxy asks the
// kernel's socket diagnostics (NETLINK_SOCK_DIAG) for the peer's socket,
// by its exact address pair: one lookup in the connection hash, not a
// dump of every socket, whose answer carries INET_DIAG_CGROUP_ID, the
// cgroup2 group the socket was made in. That id is the inode number of
// the group's directory. It is exact (the kernel's own record of the
// very socket, which a process cannot set, only inherit by being in the
// group when it makes the socket) and fast (one request and answer, a
// few microseconds). vishvananda/netlink's SocketGet is not used: it
// sends a dump request, which walks every TCP socket of the host, and
// drops the cgroup attribute. Turning an id into a path needs no
// privilege: directory entries carry inode numbers, so the groups of
// live launches, then the groups below them, then the whole tree, are
// read for it once; an id keeps naming the same group, with the same
// ancestors, for as long as the system runs, so it is remembered.
// Finding which process holds the socket, for the audit log only, reads
// the /proc/<pid>/fd links of the group's processes beside the request.
//
// # Decisions
//
// Rules are read from the declared Profile at every decision (compiled
// once per generation), so an edit applies to connections opened after
// it is declared; tunnels already open keep running. A peer in no launch
// is refused (HTTP 407, SOCKS reply 0x02) unless the Host sets
// spec.egress.unscoped: allow. Every decision is a Record for the audit
// log; denials of a workspace's agents become Warning events on it,
// counted per destination (EgressDenied).
//
// Bad input gets a protocol error and a closed connection: request heads
// and handshakes are bounded in size and time, tunnels that carry
// nothing for the idle timeout are closed (the kernel's TCP_INFO says
// when a tunnel last carried data, so copies keep no clock and are
// spliced), and no peer holds more than its share of connections.
//
// This package does not decide where it listens beyond refusing a
// non-loopback TCP address, and does not set agents' environment: the
// daemon does both.
package egress
