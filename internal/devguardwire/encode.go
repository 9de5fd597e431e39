package devguardwire

import (
	"bytes"
	"encoding/json"
)

// The answers' values, as DevGuard's types serialize them.

type peerID struct {
	UID uint32 `json:"uid"`
	PID uint32 `json:"pid"`
}

type hello struct {
	Protocol        uint32       `json:"protocol"`
	Authority       peerID       `json:"authority"`
	Caller          peerID       `json:"caller"`
	Capabilities    []Capability `json:"capabilities"`
	MaxFrameBytes   int          `json:"max_frame_bytes"`
	FrameDeadlineMS uint64       `json:"frame_deadline_ms"`
	MaxSessions     int          `json:"max_sessions"`
}

type authenticated struct {
	Role string `json:"role"`
}

type serviceStatus struct {
	StorageValidated         bool   `json:"storage_validated"`
	RegistrationReady        bool   `json:"registration_ready"`
	ExecutionReady           bool   `json:"execution_ready"`
	Reason                   string `json:"reason"`
	ConfigurationFingerprint string `json:"configuration_fingerprint"`
}

func statusOf(s Status) serviceStatus {
	return serviceStatus(s)
}

type registered struct {
	Instance instanceID `json:"instance"`
}

type launchGrant struct {
	Attempt attemptRecord `json:"attempt"`
	Permit  *string       `json:"permit"`
}

type launchAuthorization struct {
	Attempt attemptRecord `json:"attempt"`
	MayExec bool          `json:"may_exec"`
}

type termination struct {
	Attempt   attemptRecord `json:"attempt"`
	Signalled uint32        `json:"signalled"`
	Complete  bool          `json:"complete"`
}

// body is an answer's body: {"result": R, "value": V}, an error's result
// being "error".
type body struct {
	Result string `json:"result"`
	Value  any    `json:"value"`
}

type envelope struct {
	Version   uint32 `json:"version"`
	RequestID uint64 `json:"request_id"`
	Body      body   `json:"body"`
}

// encodeAnswer encodes the answer to request id. serde_json reads any
// escaping; HTML escaping is left out to write what it writes.
func encodeAnswer(buf *bytes.Buffer, id uint64, a answer) ([]byte, error) {
	b := body{Result: a.result, Value: a.value}
	if a.err != nil {
		b = body{Result: "error", Value: a.err}
	}
	buf.Reset()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(envelope{Version: WireVersion, RequestID: id, Body: b}); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
