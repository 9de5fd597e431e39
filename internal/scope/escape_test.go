package scope_test

import (
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/scope"
)

// oracleNames returns valid profile names covering the edges of DNS-1123
// labels and a fixed pseudo-random sample of the rest.
func oracleNames(t *testing.T) []string {
	t.Helper()
	names := []string{
		"a", "z", "0", "9", "a-b", "0-0", "a--b", "a---------b", "0a", "9-a",
		"abc123", "123abc", "1-2-3", "my-agent", "coder", "x-y-z-0-1-2",
		strings.Repeat("a", 63),
		strings.Repeat("9", 63),
		"a" + strings.Repeat("-", 61) + "b",
		strings.TrimSuffix(strings.Repeat("a-", 32), "-"),
		"0" + strings.Repeat("-0", 31),
	}
	const alnum = "abcdefghijklmnopqrstuvwxyz0123456789"
	for i := range len(alnum) {
		names = append(names, alnum[i:i+1], alnum[i:i+1]+"-"+alnum[len(alnum)-1-i:len(alnum)-i])
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const body = alnum + "----------"
	for range 1000 {
		b := make([]byte, 1+rng.IntN(63))
		for i := range b {
			b[i] = body[rng.IntN(len(body))]
		}
		b[0] = alnum[rng.IntN(len(alnum))]
		b[len(b)-1] = alnum[rng.IntN(len(alnum))]
		names = append(names, string(b))
	}
	for _, n := range names {
		if errs := v1alpha1.ValidateName(n); errs != nil {
			t.Fatalf("oracle set holds invalid profile %q: %v", n, errs)
		}
	}
	return names
}

// systemdEscape runs systemd-escape once over args and returns one result
// per argument. Escaped names never hold whitespace, so the output splits
// on it unambiguously.
func systemdEscape(t *testing.T, bin string, flags []string, args []string) []string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, append(append(flags, "--"), args...)...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	got := strings.Fields(string(out))
	if len(got) != len(args) {
		t.Fatalf("systemd-escape %v printed %d results for %d arguments", flags, len(got), len(args))
	}
	return got
}

func TestNamesMatchSystemdEscape(t *testing.T) {
	bin, err := exec.LookPath("systemd-escape")
	if err != nil {
		t.Skip("needs systemd-escape, which is not installed")
	}
	names := oracleNames(t)
	escaped := systemdEscape(t, bin, nil, names)
	id := scope.NewID()
	for i, name := range names {
		if got, want := scope.Escape(name), escaped[i]; got != want {
			t.Errorf("Escape(%q) = %q, want %q", name, got, want)
		}
		if got, want := scope.SliceName(name), "marshal-"+escaped[i]+".slice"; got != want {
			t.Errorf("SliceName(%q) = %q, want %q", name, got, want)
		}
		if got, want := scope.ScopeName(name, id), "marshal-"+escaped[i]+"-"+id+".scope"; got != want {
			t.Errorf("ScopeName(%q, %q) = %q, want %q", name, id, got, want)
		}
	}

	ours := make([]string, len(names))
	for i, name := range names {
		ours[i] = scope.Escape(name)
	}
	for i, got := range systemdEscape(t, bin, []string{"--unescape"}, ours) {
		if got != names[i] {
			t.Errorf("systemd-escape --unescape %q = %q, want %q", ours[i], got, names[i])
		}
	}
}
