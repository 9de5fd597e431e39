package cli

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCommandToBuild(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"run", []string{"run", "-w", "web", "--", "true"}, "run"},
		{"after_socket", []string{"--socket", "/s", "run", "-w", "web"}, "run"},
		{"after_socket_equals", []string{"--socket=/s", "get", "ws"}, "get"},
		{"socket_value_named_like_a_command", []string{"--socket", "get", "version"}, "version"},
		{"admin", []string{"admin", "backup", "f"}, "admin"},
		{"nothing", nil, ""},
		{"socket_without_value", []string{"--socket"}, ""},
		{"help_command", []string{"help", "run"}, ""},
		{"help_flag", []string{"--help", "run"}, ""},
		{"short_help_flag", []string{"-h"}, ""},
		{"unknown_flag_first", []string{"--bogus", "run"}, ""},
		{"dash_dash", []string{"--", "run"}, ""},
		{"completion", []string{"completion", "bash"}, ""},
		{"hidden_complete", []string{"__complete", "run", ""}, ""},
		{"hidden_complete_no_desc", []string{"__completeNoDesc", "get", ""}, ""},
		{"mistyped_command", []string{"gett", "ws"}, ""},
		{"command_prefix", []string{"ru", "-w", "web"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := commandToBuild(tc.args); got != tc.want {
				t.Errorf("commandToBuild(%q) = %q, want %q", tc.args, got, tc.want)
			}
		})
	}
}

func TestOneCommandIsBuiltAlone(t *testing.T) {
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			var names []string
			for _, cmd := range newRootCmd(Streams{}, c.name).Commands() {
				names = append(names, cmd.Name())
			}
			slices.Sort(names)
			// cobra's help command comes with any subcommand.
			if want := slices.Sorted(slices.Values([]string{c.name, "help"})); !slices.Equal(names, want) {
				t.Errorf("tree for %s has %q, want %q", c.name, names, want)
			}
		})
	}
}

// A command built alone behaves as it does in the whole tree: same
// output, same errors, same exit status.
func TestOneCommandBehavesAsInTheWholeTree(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "none.sock")
	argvs := [][]string{
		{"run", "-w", "web", "--", "true"},
		{"run", "-w"},
		{"run", "--pty", "--no-pty", "-w", "web", "--", "true"},
		{"version", "--client"},
		{"version", "--client", "-o", "json"},
		{"version"},
		{"admin", "bogus"},
		{"admin", "backup", "--help"},
		{"admin", "backup"},
		{"validate", "testdata/manifests/coder.yaml"},
		{"validate", "testdata/manifests/bad.yaml", "-o", "json"},
		{"get", "profiles"},
		{"get", "pods"},
		{"describe", "profile"},
		{"identify", "1"},
		{"delete", "-f", "-"},
	}
	for _, c := range commands {
		argvs = append(argvs, []string{c.name, "--help"}, []string{c.name, "--bogus"},
			[]string{c.name, "a", "b", "c", "d", "e"}, []string{c.name})
	}
	for _, args := range argvs {
		args = append([]string{"--socket", socket}, args...)
		t.Run(strings.Join(args[2:], "_"), func(t *testing.T) {
			var wholeOut, wholeErr, oneOut, oneErr bytes.Buffer
			whole := Streams{In: strings.NewReader(""), Out: &wholeOut, Err: &wholeErr}
			one := Streams{In: strings.NewReader(""), Out: &oneOut, Err: &oneErr}
			wholeCode := ExitCode(execute(t.Context(), newRootCmd(whole, ""), args, whole))
			oneCode := ExitCode(Run(t.Context(), args, one))
			if oneCode != wholeCode || oneOut.String() != wholeOut.String() || oneErr.String() != wholeErr.String() {
				t.Errorf("marshalctl %q built alone: exit %d\n%s\n%s\nin the whole tree: exit %d\n%s\n%s",
					args, oneCode, oneOut.String(), oneErr.String(), wholeCode, wholeOut.String(), wholeErr.String())
			}
		})
	}
}
