// Package launch is marshal's governed launch: it turns a request to run
// a command in a workspace into a process inside the launch's scope, or
// into a refusal made before anything was created, and it keeps what it
// launched until the process tree is gone.
//
// A launch goes through authorization (the workspace is declared and
// Ready, exec is allowed, argv[0] passes the workspace's list and
// resolves to an executable), a live-process slot of the workspace
// (Slots, reserved before anything exists), admission when the
// workspace participates (an attempt keyed by a fresh ID, bound to the
// digest of the execution's meaning), and a one-shot PreparedExecution
// that owns the slot and the attempt. Launching it begins the launch with
// the authority, records the launch, creates the scope with the caller
// moved into it, binds the scope and authorizes the run; only then does
// the caller exec, already inside its scope, so nothing it runs is ever
// outside it. marshald moves the caller, because the caller cannot start
// its agent in the scope itself (clone3 with CLONE_INTO_CGROUP): the
// kernel checks that against the caller's own credentials, which would
// have to allow writing cgroup.procs of the common ancestor of its group
// and the scope, and an unprivileged caller's do not.
//
// Launcher.Launch takes the same steps at once, for a caller that execs
// as soon as it is answered, in two requests to the authority where the
// prepared execution makes three: the attempt admitted and its launch
// begun in one (AdmitLaunch), the scope bound and the run authorized in
// another (BindAndAuthorize).
//
// Each step that makes something pushes what unmakes it on one rollback,
// which a refusal unwinds, last made first: the caller's pin, the slot,
// the attempt (cancelled while prepared, abandoned once begun without a
// scope), the record.
//
// The caller is the process that becomes the agent. It is pinned by a
// pidfd (Process) for the whole launch and until it is released, so its
// exit is known without polling and a reused pid is never taken for it.
// After the launch the Launcher keeps each launch's record, slot, process
// and timeout; the agent controller asks it which workspace and attempt a
// scope belongs to, and settles a launch (Settle: the attempt is
// reconciled with the evidence of the ended scope) before removing the
// scope and forgetting the launch (Forget: the record is deleted and the
// slot freed). A restart recovers from the records: slots are recounted
// from the launches whose scopes live, and launches that never made their
// scope are abandoned.
//
// Under netns isolation (Options.Network) the plan execs the
// marshal-confine helper with the command (isolation.Launch.Command), the
// record says so, and the launch's network namespace is the one its
// process makes, recorded the first time the egress proxy asks for it
// (NetNS) and held open until the launch is forgotten.
//
// The package speaks in refusal codes and attempt states, never in wire
// codes; the API edge maps them. It does not serve HTTP, parse flags or
// exec anything itself: the daemon's handler and marshalctl do.
package launch
