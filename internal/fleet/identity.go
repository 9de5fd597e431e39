package fleet

// A host's credential names it, as a kubelet's names its node
// (system:node:<node> in system:nodes): user HostUserPrefix+<host name>
// in the group HostsGroup. dist/kubernetes binds marshald's role to the
// group, and its admission policy lets each such user write only what
// is its own.
const (
	HostsGroup     = "marshal:hosts"
	HostUserPrefix = "marshal:host:"
)

// HostUser is the user name of host's credential.
func HostUser(host string) string { return HostUserPrefix + host }
