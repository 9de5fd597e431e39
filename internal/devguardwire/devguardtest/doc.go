// Package devguardtest is a client of DevGuard's wire protocol 1 for
// marshal's tests and benchmarks, written from the protocol's contract
// alone, not from package devguardwire: its own frames, its own encoding
// of requests and its own strict decoding of answers, so that the two
// cannot share a mistake. It checks what DevGuard's client checks (the
// authority's peer credentials against hello, the caller's identity, the
// bounds), refuses an answer of another version or request id, and keeps
// every answer's raw JSON for tests to check field by field.
package devguardtest
