// Package devguardtest is a client of DevGuard's wire protocol 1 for
// marshal's tests and benchmarks, written from the protocol's contract
// alone, not from package devguardwire: its own frames, its own encoding
// of requests and its own strict decoding of answers, so that the two
// cannot share a mistake. It checks what DevGuard's client checks (the
// authority's peer credentials against hello, the caller's identity, the
// bounds), refuses an answer of another version or request id, and keeps
// every answer's raw JSON for tests to check field by field.
//
// Unlike DevGuard's client, it waits for an answer as long as a test
// waits for any event (Within), not the 250 ms frame deadline: the tests
// are of the authority's bounds, which hello must state exactly and the
// server enforces on its own reads, and a correct answer that a busy
// machine makes slow must not fail them.
package devguardtest
