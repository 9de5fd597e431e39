package isolation

import "strconv"

// HostServices are the local sockets of the host's services that act for
// whoever connects: service managers and message buses (which start
// processes outside the agent's scope and namespaces), container engines
// and the resolvers that look names up through the host's network. An
// agent that reached one would get out of its network namespace or past
// its rules through the service, so a launch confined in its network or
// its files has them hidden unless a rule names them. uid is the
// launching user, whose session's own bus and manager are listed. Paths
// under /var/run are listed too: where /var/run is the usual link to
// /run, the helper finds them the same.
func HostServices(uid uint32) []string {
	run := RuntimeDir(uid)
	return []string{
		run + "/bus",
		run + "/systemd",
		run + "/docker.sock",
		run + "/podman",
		"/run/systemd/private",
		"/run/dbus/system_bus_socket",
		"/var/run/dbus/system_bus_socket",
		"/run/systemd/resolve/io.systemd.Resolve",
		"/run/systemd/resolve/io.systemd.Resolve.Monitor",
		"/run/nscd/socket",
		"/var/run/nscd/socket",
		"/run/avahi-daemon/socket",
		"/run/docker.sock",
		"/var/run/docker.sock",
		"/run/containerd/containerd.sock",
		"/run/podman/podman.sock",
	}
}

// RuntimeDir is uid's runtime directory, where its session's services
// and key agents listen (gpg-agent, ssh agents, keyrings).
func RuntimeDir(uid uint32) string {
	return "/run/user/" + strconv.FormatUint(uint64(uid), 10)
}
