package identity_test

import (
	"strings"
	"testing"

	"github.com/marshal-dev/marshal/internal/identity"
)

func TestStatFields(t *testing.T) {
	tests := []struct {
		name  string
		line  string
		state string
		nice  string
	}{
		{name: "plain", line: "42 (sh) S 1 42 42 0 -1 4194560 1 2 3 4 5 6 7 8 20 10 1 0 1234", state: "S", nice: "10"},
		{name: "spaces_and_parentheses_in_the_name", line: "42 (a) b (c) R 1 42 42 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 1234", state: "R", nice: "0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := identity.StatFields([]byte(tc.line))
			if err != nil {
				t.Fatal(err)
			}
			if f[0] != tc.state || f[16] != tc.nice {
				t.Errorf("StatFields(%q): state %q nice %q, want %q %q", tc.line, f[0], f[16], tc.state, tc.nice)
			}
		})
	}
	if _, err := identity.StatFields([]byte("42 no name")); err == nil {
		t.Error("StatFields of a line without a command name succeeded")
	}
}

func TestParseStatReadsTheFieldsMarshalUses(t *testing.T) {
	// Fields 3 to 52 of a zombie: state Z, parent 7, nice 5, start time
	// 1234 and exit code 256 (exit status 1).
	f := make([]string, 50)
	for i := range f {
		f[i] = "0"
	}
	f[0], f[1], f[16], f[19], f[49] = "Z", "7", "5", "1234", "256"
	line := "42 (a) b) " + strings.Join(f, " ")
	st, err := identity.ParseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	want := identity.Stat{State: 'Z', Parent: 7, Nice: 5, StartTime: 1234, ExitCode: 256, HasExitCode: true}
	if st != want {
		t.Errorf("ParseStat = %+v, want %+v", st, want)
	}
	if st, err := identity.ParseStat([]byte("42 (a) " + strings.Join(f[:20], " "))); err != nil || st.HasExitCode {
		t.Errorf("ParseStat without field 52 = %+v, %v; want no exit code, no error", st, err)
	}
	if _, err := identity.ParseStat([]byte("42 (a) S 1 0")); err == nil {
		t.Error("ParseStat of a short line succeeded")
	}
}
