// Package devguardwire serves DevGuard's local wire protocol (protocol 1
// of novelKR/DevGuard's client and daemon crates) on a unix socket of
// its own, so that DevGuard's clients, CodeSpace's gateway among them,
// admit, launch and release through marshald unchanged.
//
// The transport is DevGuard's: frames of a 4-byte big-endian length and
// 1 to 65,536 bytes of JSON, each whole frame read or written within
// 250 ms, idle waiting included, at most 32 sessions at once, and only the
// authority's own uid served (SO_PEERCRED). Decoding is as strict as
// DevGuard's: an unknown, repeated or missing field, an unknown method or
// enumeration, or a secret that is not 64 lowercase hex digits ends the
// session without an answer, as does a frame of 0 or more than 65,536
// bytes. A session is hello, then authenticate, status, register and the
// requests on the registered instance's attempts; a launch helper's
// session is hello and launch alone.
//
// Client is the helper's side of a session. It checks what DevGuard's
// client checks, but waits for its answers up to AnswerWithin rather
// than 250 ms: the launch it asks for makes a scope and commits to the
// journal before it is answered.
//
// Every answer comes from a Daemon, which marshald implements over its
// admission authority and launch path: the attempts and the journal are
// the ones marshal's own local API serves. This package maps them onto
// DevGuard's records and error codes and holds no state beyond a
// session's. It knows nothing of the kernel, and the Daemon nothing of
// frames.
package devguardwire
