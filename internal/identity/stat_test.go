package identity_test

import (
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
