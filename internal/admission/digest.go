package admission

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

// Domain tags of DevGuard's encodings, version 1.
const (
	executionTag = "devguard-execution-v1"
	admissionTag = "devguard-admission-v1"
)

// ExecutionMeaning is what an execution means, as DevGuard's
// ExecutionMeaning: the launch code fills it, the authority stores only
// its digest. Two executions with the same digest are the same execution.
type ExecutionMeaning struct {
	// ExecutableIdentity identifies the program (its resolved path, or a
	// hash of it).
	ExecutableIdentity string `json:"executable_identity"`
	// CWDIdentity identifies the working directory.
	CWDIdentity string `json:"cwd_identity"`
	// Argv is the command as given; argv[0] must not be empty.
	Argv []string `json:"argv"`
	// EnvironmentChanges is the child's environment beyond the inherited
	// one; encoded with keys sorted.
	EnvironmentChanges map[string]string `json:"environment_changes"`
	// TTY reports whether the execution runs on a terminal.
	TTY bool `json:"tty"`
	// TimeoutMS is the timeout in milliseconds, positive; no timeout is
	// NoTimeout.
	TimeoutMS uint64 `json:"timeout_ms"`
	// Resources is the resource intent.
	Resources Intent `json:"resources"`
}

// NoTimeout is the TimeoutMS of an execution without a timeout: the
// largest value, as DevGuard's digest encodes it.
const NoTimeout uint64 = math.MaxUint64

// MarshalJSON writes the meaning for people (marshalctl run --explain):
// its fields as they are, but without timeout_ms when there is no
// timeout, where the digest's encoding writes NoTimeout's 20 digits.
func (m ExecutionMeaning) MarshalJSON() ([]byte, error) {
	type fields ExecutionMeaning
	v := struct {
		fields
		TimeoutMS *uint64 `json:"timeout_ms,omitempty"`
	}{fields: fields(m)}
	if m.TimeoutMS != NoTimeout {
		v.TimeoutMS = &m.TimeoutMS
	}
	return json.Marshal(v)
}

// Digest returns the lowercase hex SHA-256 of the meaning's encoding,
// byte for byte DevGuard's: serde_json's compact encoding of
// ["devguard-execution-v1", meaning] with fields in declaration order and
// environment keys sorted. Strings must be valid UTF-8 (Rust strings are).
func (m ExecutionMeaning) Digest() (string, error) {
	b, err := m.encode()
	if err != nil {
		return "", err
	}
	return sha256Hex(b), nil
}

func (m ExecutionMeaning) encode() ([]byte, error) {
	if len(m.Argv) == 0 || m.Argv[0] == "" || m.TimeoutMS == 0 {
		return nil, fmt.Errorf("execution meaning needs argv[0] and a positive timeout: %w", ErrInvalidRequest)
	}
	if !m.Resources.Requested.validWorkload() {
		return nil, fmt.Errorf("execution meaning: requested quantities must be positive: %w", ErrInvalidRequest)
	}
	strs := append([]string{m.ExecutableIdentity, m.CWDIdentity, m.Resources.Profile}, m.Argv...)
	for k, v := range m.EnvironmentChanges {
		strs = append(strs, k, v)
	}
	for _, s := range strs {
		if !utf8.ValidString(s) {
			return nil, fmt.Errorf("execution meaning holds a string that is not UTF-8: %w", ErrInvalidRequest)
		}
	}
	if !m.Resources.Minimum.valid() {
		return nil, fmt.Errorf("execution meaning: minimum levels: %w", ErrInvalidRequest)
	}
	b := make([]byte, 0, 512)
	b = append(b, '[')
	b = appendString(b, executionTag)
	b = append(b, `,{"executable_identity":`...)
	b = appendString(b, m.ExecutableIdentity)
	b = append(b, `,"cwd_identity":`...)
	b = appendString(b, m.CWDIdentity)
	b = append(b, `,"argv":[`...)
	for i, a := range m.Argv {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, a)
	}
	b = append(b, `],"environment_changes":{`...)
	// BTreeMap<String, String> orders keys by their bytes, as sorting Go
	// strings does.
	for i, k := range slices.Sorted(maps.Keys(m.EnvironmentChanges)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = appendString(b, m.EnvironmentChanges[k])
	}
	b = append(b, `},"tty":`...)
	b = strconv.AppendBool(b, m.TTY)
	b = append(b, `,"timeout_ms":`...)
	b = strconv.AppendUint(b, m.TimeoutMS, 10)
	b = append(b, `,"resources":`...)
	b = appendIntent(b, m.Resources)
	b = append(b, "}]"...)
	return b, nil
}

// Fingerprint returns the admission fingerprint of an attempt, byte for
// byte DevGuard's: SHA-256 of ["devguard-admission-v1", digest, intent].
// It binds an attempt key to both what runs and what it reserves.
func Fingerprint(digest string, in Intent) (string, error) {
	if !validDigest(digest) {
		return "", fmt.Errorf("digest must be 64 lowercase hex digits: %w", ErrInvalidRequest)
	}
	if err := in.validate(); err != nil {
		return "", err
	}
	return fingerprint(digest, in), nil
}

// fingerprint is Fingerprint of a digest and an intent already checked.
func fingerprint(digest string, in Intent) string {
	b := make([]byte, 0, 256)
	b = append(b, '[')
	b = appendString(b, admissionTag)
	b = append(b, ',')
	b = appendString(b, digest)
	b = append(b, ',')
	b = appendIntent(b, in)
	b = append(b, ']')
	return sha256Hex(b)
}

func appendIntent(b []byte, in Intent) []byte {
	b = append(b, `{"profile":`...)
	b = appendString(b, in.Profile)
	b = append(b, `,"requested":{"cpu_milli":`...)
	b = strconv.AppendUint(b, in.Requested.CPUMilli, 10)
	b = append(b, `,"memory_bytes":`...)
	b = strconv.AppendUint(b, in.Requested.MemoryBytes, 10)
	b = append(b, `,"tasks":`...)
	b = strconv.AppendUint(b, in.Requested.Tasks, 10)
	b = append(b, `},"minimum":{"cpu":`...)
	b = appendLevel(b, in.Minimum.CPU)
	b = append(b, `,"memory":`...)
	b = appendLevel(b, in.Minimum.Memory)
	b = append(b, `,"pids":`...)
	b = appendLevel(b, in.Minimum.PIDs)
	return append(b, "}}"...)
}

// appendLevel writes a level as serde writes EnforcementLevel with
// rename_all = "snake_case"; the names are the same.
func appendLevel(b []byte, l v1alpha1.Level) []byte { return appendString(b, string(l)) }

// appendString writes s as serde_json does: '"' and '\\' escaped, the
// control characters below U+0020 as \b \t \n \f \r or \u00XX with
// lowercase hex, and everything else, including '<', '>', '&', U+2028,
// U+2029 and DEL, as it is. encoding/json would escape the HTML
// characters and the line separators, so it is not used here.
func appendString(b []byte, s string) []byte {
	const hexdigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\b':
			b = append(b, '\\', 'b')
		case '\t':
			b = append(b, '\\', 't')
		case '\n':
			b = append(b, '\\', 'n')
		case '\f':
			b = append(b, '\\', 'f')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, '\\', 'u', '0', '0', hexdigits[c>>4], hexdigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
