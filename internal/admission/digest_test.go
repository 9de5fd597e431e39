package admission

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

// vector is one case of testdata/digest_vectors.json, produced by
// serde_json from DevGuard's own struct definitions
// (testdata/digestoracle).
type vector struct {
	Name              string           `json:"name"`
	Meaning           ExecutionMeaning `json:"meaning"`
	MeaningEncoding   string           `json:"meaning_encoding"`
	MeaningSHA256     string           `json:"meaning_sha256"`
	AdmissionDigest   string           `json:"admission_digest"`
	AdmissionEncoding string           `json:"admission_encoding"`
	AdmissionSHA256   string           `json:"admission_sha256"`
}

func loadVectors(t *testing.T) []vector {
	t.Helper()
	data, err := os.ReadFile("testdata/digest_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vs []vector
	if err := json.Unmarshal(data, &vs); err != nil {
		t.Fatal(err)
	}
	if len(vs) < 5 {
		t.Fatalf("%d vectors, want at least 5", len(vs))
	}
	return vs
}

// The digest is DevGuard's byte for byte: '<', '>' and '&' raw, U+2028
// and U+2029 raw, control characters escaped as serde_json does, non-ASCII
// raw, environment keys in byte order, the largest timeout.
func TestDigestMatchesDevGuardsEncodingByteForByte(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			enc, err := v.Meaning.encode()
			if err != nil {
				t.Fatal(err)
			}
			if string(enc) != v.MeaningEncoding {
				t.Fatalf("encoding\n got %q\nwant %q", enc, v.MeaningEncoding)
			}
			sum := sha256.Sum256([]byte(v.MeaningEncoding))
			if hex.EncodeToString(sum[:]) != v.MeaningSHA256 {
				t.Fatalf("vector's own SHA-256 is wrong")
			}
			d, err := v.Meaning.Digest()
			if err != nil || d != v.MeaningSHA256 {
				t.Fatalf("Digest() = %s, %v; want %s", d, err, v.MeaningSHA256)
			}
			fp, err := Fingerprint(v.AdmissionDigest, v.Meaning.Resources)
			if err != nil || fp != v.AdmissionSHA256 {
				t.Fatalf("Fingerprint() = %s, %v; want %s (of %s)", fp, err, v.AdmissionSHA256, v.AdmissionEncoding)
			}
		})
	}
}

// encoding/json would get these wrong; the vectors must exercise them.
func TestVectorsCoverTheCharactersEncodingJSONWouldEscape(t *testing.T) {
	all := ""
	for _, v := range loadVectors(t) {
		all += v.MeaningEncoding
	}
	for _, s := range []string{"<", ">", "&", "\u2028", "\u2029", `\u0000`, `\u001f`, `\b`, `\f`, "\x7f", "é", "🦀", "18446744073709551615"} {
		if !strings.Contains(all, s) {
			t.Errorf("no vector encodes %q", s)
		}
	}
}

func baseMeaning() ExecutionMeaning {
	return ExecutionMeaning{
		ExecutableIdentity: "cargo-sha256",
		CWDIdentity:        "registered-root-1",
		Argv:               []string{"cargo", "test"},
		EnvironmentChanges: map[string]string{"B": "2", "A": "1"},
		TimeoutMS:          30000,
		Resources: Intent{Profile: "interactive", Requested: Budget{1000, 2 << 30, 64},
			Minimum: Levels{v1alpha1.LevelCooperative, v1alpha1.LevelAccounted, v1alpha1.LevelAccounted}},
	}
}

// DevGuard: meaning_digest_covers_execution_semantics_and_has_deterministic_environment_order.
func TestDigestCoversEveryPartOfTheMeaning(t *testing.T) {
	base, err := baseMeaning().Digest()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 { // map order differs between runs; the digest must not
		if d, _ := baseMeaning().Digest(); d != base {
			t.Fatalf("run %d: digest %s, want %s", i, d, base)
		}
	}
	variants := []struct {
		name   string
		change func(*ExecutionMeaning)
	}{
		{"argv_appended", func(m *ExecutionMeaning) { m.Argv = append(m.Argv, "--release") }},
		{"argv_split", func(m *ExecutionMeaning) { m.Argv = []string{"cargo test"} }},
		{"cwd", func(m *ExecutionMeaning) { m.CWDIdentity = "another-root" }},
		{"executable", func(m *ExecutionMeaning) { m.ExecutableIdentity = "other" }},
		{"tty", func(m *ExecutionMeaning) { m.TTY = true }},
		{"timeout", func(m *ExecutionMeaning) { m.TimeoutMS++ }},
		{"env_value", func(m *ExecutionMeaning) { m.EnvironmentChanges = map[string]string{"A": "changed", "B": "2"} }},
		{"env_key_moved", func(m *ExecutionMeaning) { m.EnvironmentChanges = map[string]string{"A": "1", "C": "2"} }},
		{"env_empty_value", func(m *ExecutionMeaning) { m.EnvironmentChanges = map[string]string{"A": "1", "B": "2", "C": ""} }},
		{"tasks", func(m *ExecutionMeaning) { m.Resources.Requested.Tasks++ }},
		{"profile", func(m *ExecutionMeaning) { m.Resources.Profile = "coder" }},
		{"minimum", func(m *ExecutionMeaning) { m.Resources.Minimum.PIDs = v1alpha1.LevelKernel }},
	}
	for _, tc := range variants {
		t.Run(tc.name, func(t *testing.T) {
			m := baseMeaning()
			tc.change(&m)
			d, err := m.Digest()
			if err != nil || d == base {
				t.Fatalf("Digest() = %s, %v; want a different digest", d, err)
			}
		})
	}
}

func TestDigestRefusesWhatDevGuardCannotEncode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*ExecutionMeaning)
	}{
		{"no_argv", func(m *ExecutionMeaning) { m.Argv = nil }},
		{"empty_argv0", func(m *ExecutionMeaning) { m.Argv = []string{""} }},
		{"zero_timeout", func(m *ExecutionMeaning) { m.TimeoutMS = 0 }},
		{"zero_memory", func(m *ExecutionMeaning) { m.Resources.Requested.MemoryBytes = 0 }},
		{"argv_not_utf8", func(m *ExecutionMeaning) { m.Argv = []string{"ls", "\xff"} }},
		{"env_key_not_utf8", func(m *ExecutionMeaning) { m.EnvironmentChanges = map[string]string{"\xc3": "x"} }},
		{"cwd_not_utf8", func(m *ExecutionMeaning) { m.CWDIdentity = "/home/\xe2\x82" }},
		{"unknown_level", func(m *ExecutionMeaning) { m.Resources.Minimum.CPU = "hard" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := baseMeaning()
			tc.change(&m)
			if _, err := m.Digest(); !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("Digest() error = %v, want %v", err, ErrInvalidRequest)
			}
		})
	}
}

// The fingerprint binds the digest and the intent separately.
func TestFingerprintChangesWithDigestOrIntent(t *testing.T) {
	in := baseMeaning().Resources
	in.Profile = "coder"
	base, err := Fingerprint(meaning, in)
	if err != nil {
		t.Fatal(err)
	}
	more := in
	more.Requested.CPUMilli++
	for name, fp := range map[string]func() (string, error){
		"digest": func() (string, error) { return Fingerprint(digestOf("x"), in) },
		"intent": func() (string, error) { return Fingerprint(meaning, more) },
	} {
		if got, err := fp(); err != nil || got == base {
			t.Errorf("%s changed: fingerprint %s, %v; want a different one", name, got, err)
		}
	}
	if _, err := Fingerprint("ABC", in); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("Fingerprint of a bad digest = %v, want %v", err, ErrInvalidRequest)
	}
}

func TestIntentForTakesADefaultedRequest(t *testing.T) {
	w := v1alpha1.Workspace{Spec: v1alpha1.WorkspaceSpec{Root: "/src", Profile: "coder",
		Resources: &v1alpha1.ResourcesSpec{Participation: v1alpha1.ParticipationRequired}}}
	if _, err := IntentFor("coder", v1alpha1.ResourceRequest{}); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("IntentFor an undefaulted request = %v, want %v", err, ErrInvalidRequest)
	}
	w.Default()
	in, err := IntentFor("coder", *w.Spec.Resources.Request)
	if err != nil {
		t.Fatal(err)
	}
	want := Intent{Profile: "coder", Requested: Budget{250, 256 << 20, 32},
		Minimum: Levels{v1alpha1.LevelAccounted, v1alpha1.LevelAccounted, v1alpha1.LevelAccounted}}
	if in != want {
		t.Fatalf("IntentFor = %+v, want %+v", in, want)
	}
}
