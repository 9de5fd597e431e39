// Package devguardlaunch is marshal-devguard-launch, DevGuard's launch
// helper (devguard-launch) on Linux: the process an owner such as
// CodeSpace starts, as its direct child, for one launch grant. It reads
// the grant's permit from a private descriptor, presents the grant to
// marshald on DevGuard's socket, and execs the program only when
// marshald answers that it may: by then marshald has made the attempt's
// scope, moved the helper into it, read its limits back, bound it and
// authorized the run, so the program starts inside its scope and every
// process it forks stays there.
//
// The contract is devguard-launch's:
//
//	marshal-devguard-launch --endpoint SOCKET --consumer ID --generation ID
//	    --attempt ID --instance ID --permit-fd N --report-fd M -- PROGRAM [ARGS…]
//
// with absolute paths, N and M distinct and above 2. The helper leads its
// process group, reads exactly 64 permit bytes within 250 ms and closes
// N, marks M close-on-exec, and reports on M one JSON line per phase:
// failed (with its stage), refused (with marshald's code), ready, and
// exec_failed (with the errno). READY followed by the end of M means the
// program started. It exits 125 when it was not authorized or its
// arguments are wrong, 127 when the program does not exist, 126 when the
// exec failed otherwise, and with the program's status once it runs.
//
// DevGuard's macOS helper re-executes itself under a QoS clamp first
// (--stage clamped). On Linux a cooperative CPU level is marshald's to
// apply, to the helper's process, before it authorizes the run; the
// helper does not re-execute, and --stage clamped is accepted and
// ignored.
package devguardlaunch
