package cli

import (
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/internal/testutil"
	"github.com/spf13/cobra"
)

// completion is what one run of marshalctl __complete offered.
type completion struct {
	choices   []string // without their descriptions
	directive cobra.ShellCompDirective
	stdout    string
	stderr    string
	code      int
}

// complete asks for completions as the shell scripts do: marshalctl
// __complete followed by the words typed, the last one being completed.
func complete(t *testing.T, words ...string) completion {
	t.Helper()
	var out, errOut bytes.Buffer
	err := Run(t.Context(), append([]string{cobra.ShellCompRequestCmd}, words...),
		Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
	c := completion{stdout: out.String(), stderr: errOut.String(), code: ExitCode(err)}
	lines := strings.Split(strings.TrimSuffix(c.stdout, "\n"), "\n")
	last := lines[len(lines)-1]
	d, perr := strconv.Atoi(strings.TrimPrefix(last, ":"))
	if !strings.HasPrefix(last, ":") || perr != nil {
		t.Fatalf("__complete %q printed no directive:\n%s", words, c.stdout)
	}
	c.directive = cobra.ShellCompDirective(d)
	for _, l := range lines[:len(lines)-1] {
		name, _, _ := strings.Cut(l, "\t")
		c.choices = append(c.choices, name)
	}
	return c
}

var allKinds = []string{"profiles", "profile", "prof", "pr", "workspaces", "workspace", "ws",
	"hosts", "host", "consumers", "consumer", "cons", "agents", "agent", "ag"}

const (
	noFile   = cobra.ShellCompDirectiveNoFileComp
	fileExt  = cobra.ShellCompDirectiveFilterFileExt
	noSpace  = cobra.ShellCompDirectiveNoSpace
	agentOne = "marshal-coder-" + agentID + ".scope"
	agentTwo = "marshal-writer-00000000000000000000000000000001.scope"
)

// TestCompletion runs the completion functions through cobra's hidden
// __complete command, against a real API server holding the fixture.
func TestCompletion(t *testing.T) {
	h := newHarness(t).withFixture()
	sock := []string{"--socket", h.socket}
	tests := []struct {
		name      string
		words     []string
		want      []string
		directive cobra.ShellCompDirective
	}{
		{name: "kinds", words: []string{"get", ""}, want: allKinds, directive: noFile},
		{name: "kinds_by_prefix", words: []string{"describe", "w"}, want: []string{"workspaces", "workspace", "ws"}, directive: noFile},
		{name: "kinds_for_delete", words: []string{"delete", "ag"}, want: []string{"agents", "agent", "ag"}, directive: noFile},
		{name: "names_from_daemon", words: append(sock, "get", "workspaces", ""), want: []string{"docs", "webapp"}, directive: noFile},
		{name: "names_by_short_kind_and_prefix", words: append(sock, "get", "ws", "w"), want: []string{"webapp"}, directive: noFile},
		{name: "names_of_agents", words: append(sock, "get", "ag", ""), want: []string{agentOne, agentTwo}, directive: noFile},
		{name: "names_for_describe", words: append(sock, "describe", "profile", ""), want: []string{"coder", "writer"}, directive: noFile},
		{name: "names_for_delete", words: append(sock, "delete", "pr", "w"), want: []string{"writer"}, directive: noFile},
		{name: "socket_flag_after_command", words: []string{"get", "--socket", h.socket, "hosts", ""}, want: []string{"local"}, directive: noFile},
		{name: "nothing_after_the_name", words: append(sock, "get", "profiles", "coder", ""), directive: noFile},
		{name: "nothing_for_an_unknown_kind", words: append(sock, "get", "nope", ""), directive: noFile},
		{name: "nothing_for_delete_with_files", words: append(sock, "delete", "-f", "x.yaml", ""), directive: noFile},
		{name: "output_of_get", words: []string{"get", "profiles", "-o", ""}, want: []string{"wide", "yaml", "json", "name"}, directive: noFile},
		{name: "output_of_identify", words: []string{"identify", "-o", ""}, want: []string{"json"}, directive: noFile},
		{name: "output_of_validate", words: []string{"validate", "-o", ""}, want: []string{"json"}, directive: noFile},
		{name: "output_of_version", words: []string{"version", "-o", ""}, want: []string{"json"}, directive: noFile},
		{name: "events_for_kind", words: append(sock, "events", "--for", "w"),
			want: []string{"workspaces/", "workspace/", "ws/"}, directive: noFile | noSpace},
		{name: "events_for_name", words: append(sock, "events", "--for", "ws/"), want: []string{"ws/docs", "ws/webapp"}, directive: noFile},
		{name: "events_for_name_by_prefix", words: append(sock, "events", "--for", "profile/co"), want: []string{"profile/coder"}, directive: noFile},
		{name: "events_for_unknown_kind", words: append(sock, "events", "--for", "nope/"), directive: noFile},
		{name: "completion_shells", words: []string{"completion", ""}, want: []string{"bash", "zsh", "fish"}, directive: noFile},
		{name: "validate_manifest_files", words: []string{"validate", ""}, want: manifestExts, directive: fileExt},
		{name: "apply_manifest_files", words: []string{"apply", "-f", ""}, want: manifestExts, directive: fileExt},
		{name: "diff_manifest_files", words: []string{"diff", "-f", ""}, want: manifestExts, directive: fileExt},
		{name: "nothing_for_doctor", words: []string{"doctor", ""}, directive: noFile},
		{name: "nothing_for_identify", words: []string{"identify", ""}, directive: noFile},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := complete(t, tc.words...)
			if !slices.Equal(c.choices, tc.want) || c.directive != tc.directive {
				t.Errorf("complete %q = %q, directive %d; want %q, directive %d", tc.words, c.choices, c.directive, tc.want, tc.directive)
			}
			if c.code != 0 {
				t.Errorf("complete %q exited %d: %s", tc.words, c.code, c.stderr)
			}
		})
	}
}

func TestCompletionOfCommands(t *testing.T) {
	c := complete(t, "")
	for _, want := range []string{"completion", "version", "get", "describe", "delete", "events", "help"} {
		if !slices.Contains(c.choices, want) {
			t.Errorf("complete \"\" = %q, want it to offer %q", c.choices, want)
		}
	}
	if slices.Contains(c.choices, cobra.ShellCompRequestCmd) {
		t.Errorf("complete \"\" offers the hidden %s", cobra.ShellCompRequestCmd)
	}
}

func TestCompletionFindsTheDaemonByEnvironment(t *testing.T) {
	h := newHarness(t).withFixture()
	t.Setenv("MARSHAL_SOCKET", h.socket)
	c := complete(t, "describe", "ws", "d")
	if !slices.Equal(c.choices, []string{"docs"}) {
		t.Errorf("with MARSHAL_SOCKET: complete describe ws d = %q, want [docs]", c.choices)
	}
}

// TestCompletionIsSilentWithoutDaemon: at a prompt, an absent daemon
// means no names, and no error in the way.
func TestCompletionIsSilentWithoutDaemon(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "none.sock")
	c := complete(t, "--socket", socket, "get", "workspaces", "")
	if len(c.choices) != 0 || c.stdout != fmt.Sprintf(":%d\n", noFile) || c.code != 0 {
		t.Errorf("without a daemon: complete = %q (exit %d), want only the directive:\n%s", c.choices, c.code, c.stdout)
	}
	if strings.Contains(c.stderr, "marshalctl:") || strings.Contains(c.stderr, "not running") {
		t.Errorf("without a daemon, complete printed an error: %q", c.stderr)
	}
	// Kinds need no daemon.
	if c := complete(t, "--socket", socket, "get", "h"); !slices.Equal(c.choices, []string{"hosts", "host"}) {
		t.Errorf("without a daemon: complete get h = %q, want [hosts host]", c.choices)
	}
}

// TestCompletionGivesUpOnAHungDaemon: a daemon that accepts and never
// answers costs the prompt completionTimeout, then nothing is offered.
func TestCompletionGivesUpOnAHungDaemon(t *testing.T) {
	socket := filepath.Join(testutil.ShortDir(t), "hung.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		for _, c := range conns {
			c.Close()
		}
	})
	old := completionTimeout
	completionTimeout = 50 * time.Millisecond
	t.Cleanup(func() { completionTimeout = old })

	c := complete(t, "--socket", socket, "get", "workspaces", "")
	if len(c.choices) != 0 || c.code != 0 {
		t.Errorf("with a hung daemon: complete = %q (exit %d), want nothing", c.choices, c.code)
	}
}

// walk calls fn with cmd and every command below it, hidden ones
// excepted.
func walk(cmd *cobra.Command, fn func(*cobra.Command)) {
	if cmd.Hidden {
		return
	}
	fn(cmd)
	for _, c := range cmd.Commands() {
		walk(c, fn)
	}
}

func TestEveryOutputFlagCompletes(t *testing.T) {
	walk(newRootCmd(Streams{}, ""), func(cmd *cobra.Command) {
		if cmd.Flags().Lookup("output") == nil {
			return
		}
		if _, ok := cmd.GetFlagCompletionFunc("output"); !ok {
			t.Errorf("%s has -o but no completion of its values (add it to outputFormats)", cmd.CommandPath())
		}
	})
}

// TestEveryCommandHasExamples walks the whole command tree: a command
// added later without an example fails here.
func TestEveryCommandHasExamples(t *testing.T) {
	var paths []string
	walk(newRootCmd(Streams{}, ""), func(cmd *cobra.Command) { paths = append(paths, cmd.CommandPath()) })
	if len(paths) < 13 {
		t.Fatalf("walked %q: the tree is missing commands", paths)
	}
	for _, path := range paths {
		t.Run(strings.ReplaceAll(path, " ", "_"), func(t *testing.T) {
			args := append(strings.Fields(path)[1:], "--help")
			var out, errOut bytes.Buffer
			err := Run(t.Context(), args, Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
			if err != nil {
				t.Fatalf("%s --help: %v %s", path, err, errOut.String())
			}
			_, examples, ok := strings.Cut(out.String(), "\nExamples:\n")
			if !ok || !strings.Contains(examples, "marshalctl ") {
				t.Errorf("%s --help shows no example:\n%s", path, out.String())
			}
		})
	}
}

func TestCompletionScripts(t *testing.T) {
	// How each shell checks a script's syntax without running it.
	checkers := map[string][]string{
		"bash": {"bash", "-n"},
		"zsh":  {"zsh", "-n"},
		"fish": {"fish", "--no-execute"},
	}
	for _, shell := range shells {
		t.Run(shell, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := Run(t.Context(), []string{"completion", shell}, Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
			if err != nil {
				t.Fatalf("completion %s: %v %s", shell, err, errOut.String())
			}
			script := out.String()
			if !strings.Contains(script, "marshalctl") || !strings.Contains(script, cobra.ShellCompRequestCmd) {
				t.Fatalf("completion %s is not a completion script for marshalctl:\n%.300s", shell, script)
			}
			check := checkers[shell]
			path, err := exec.LookPath(check[0])
			if err != nil {
				t.Skipf("%s is not installed: the script's syntax is not checked", check[0])
			}
			cmd := exec.CommandContext(t.Context(), path, check[1:]...)
			cmd.Stdin = strings.NewReader(script)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s rejects the script: %v\n%s", shell, err, out)
			}
		})
	}
}

func TestCompletionRefusesOtherShells(t *testing.T) {
	var out, errOut bytes.Buffer
	err := Run(t.Context(), []string{"completion", "tcsh"}, Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
	if ExitCode(err) != ExitUsage || !strings.Contains(errOut.String(), `unknown shell "tcsh" (want bash, zsh or fish)`) || out.Len() != 0 {
		t.Errorf("completion tcsh: exit %d, %q %q; want exit 2 naming the shells", ExitCode(err), out.String(), errOut.String())
	}
}
