// Package admission is marshal's admission authority: it decides whether
// an execution may reserve part of the host's work capacity, and keeps
// every reservation, from admission to its release on evidence, in a
// journal that survives crashes and restarts.
//
// It keeps the contract of DevGuard's authority (docs/contracts.md of
// novelKR/DevGuard) on Linux:
//
//   - Owners register with their kernel identity (uid and pid from
//     SO_PEERCRED, the process start time and the boot ID) and a
//     generation; a stale generation is unauthorized, and an attempt is
//     visible to its owner alone. A long-lived launcher (marshald) is the
//     owner of every attempt it makes: it binds the process it moved into
//     the scope as the attempt's root, and after a restart, as the next
//     generation, abandons the launches its earlier generation began
//     without making their scope (AbandonInherited).
//   - Consumers of DevGuard's wire (SetConsumers, from the Consumer
//     manifests) register instances instead, one per process
//     (RegisterInstance): a registration is recorded once and only
//     reactivated after, another process under an instance's id
//     conflicts, and max_instances bounds them, an ended instance
//     holding nothing being retired to make room. Their attempts are
//     keyed as DevGuard keys them (AdmitKey), belong to the instance that
//     admitted them, are planned in what DevGuard's wire can name, and
//     otherwise live as marshald's own do. Each consumer's static control
//     reservation, times its max_instances, comes off the work capacity.
//   - Admit records an attempt under a caller-chosen key, bound to its
//     meaning by the admission fingerprint of the ExecutionMeaning digest
//     and the resource intent: prepared with a deadline, or denied. A
//     replay returns the stored record, another meaning under the same key
//     conflicts.
//   - Phases move prepared → launch_committed → scope_bound →
//     run_authorized → released, or to cancelled, expired, draining and
//     suspect; prepared through suspect are charged against capacity.
//   - A reservation is released only on evidence: the scope's cgroup
//     unpopulated and its launched process exited, the owner's report that
//     nothing was created, or a reboot.
//   - The target is the host's work capacity scaled by pressure (package
//     pressure): whole, half or nothing.
//
// The journal is a bbolt file in the daemon's state directory, created
// only by Create and refused by Open when missing, corrupt, foreign, of an
// unknown schema or inconsistent. Every state-changing request commits
// before it is answered; one writer goroutine commits whatever requests
// wait at that moment as one entry of the journal's write-ahead log (one
// fdatasync), so concurrent callers share a sync without a batching
// delay. The journal takes the log up at checkpoints (wal.go).
//
// The package does not create scopes, move processes or read cgroups: the
// launch code and the agent controller do, and hand the authority what
// they observed. It does not map its errors to wire codes either; the API
// edge does. Nothing it returns carries free text meant for people: phases,
// reasons and identifiers only.
package admission
