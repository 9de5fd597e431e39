//go:build linux

package test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// eventLine waits for a line of events -w that holds every one of want,
// and returns it.
func eventLine(t *testing.T, events *lines, what string, want ...string) string {
	t.Helper()
	var got string
	events.until(t, what, func(line string) bool {
		for _, w := range want {
			if !strings.Contains(line, w) {
				return false
			}
		}
		got = line
		return true
	})
	return got
}

// An agent's start and end are events on its workspace, as events -w
// streams them: started with its scope, attempt and pid; exited with its
// status (Normal for 0, a Warning otherwise) or the signal that ended it;
// and a refused launch with its code, attempt and state.
func TestAgentEventsOnTheWorkspace(t *testing.T) {
	root := t.TempDir()
	d := startLaunchDaemon(t, launchManifests(root, roomy,
		launchWorkspace{name: "web", participation: "required", maxLive: 1}), "web")
	events := d.watchLines("events", "-w", "--for", "workspace/web")

	scopeOf := regexp.MustCompile(`marshal-coder-[0-9a-f]{32}\.scope`)
	for _, tc := range []struct {
		name, script string
		typ, ended   string
	}{
		{name: "exit_0", script: "echo $$", typ: "Normal", ended: "exited with status 0"},
		{name: "exit_3", script: "echo $$; exit 3", typ: "Warning", ended: "exited with status 3"},
		{name: "killed", script: "echo $$; kill -KILL $$", typ: "Warning", ended: "killed by signal 9 (killed)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := d.runNow("-w", "web", "--", "sh", "-c", tc.script)
			pid := strings.TrimSpace(r.stdout)
			if pid == "" {
				t.Fatalf("the agent printed no pid: exit %d, stderr %s", r.code, r.stderr)
			}
			started := eventLine(t, events, "AgentStarted of pid "+pid, "Normal", "AgentStarted", "pid "+pid+")", "attempt ")
			scope := scopeOf.FindString(started)
			if scope == "" {
				t.Fatalf("AgentStarted names no scope: %s", started)
			}
			ended := eventLine(t, events, "AgentExited of "+scope, "AgentExited", scope, "pid "+pid+")")
			if !strings.Contains(ended, tc.typ) || !strings.Contains(ended, tc.ended) {
				t.Errorf("AgentExited = %q, want a %s that says %q", ended, tc.typ, tc.ended)
			}
		})
	}

	// The one slot held, the next launch is refused.
	a := d.startRun(append([]string{"-w", "web"}, blockingAgent...)...)
	waitFiles(t, root, "m-", 1)
	if r := d.runNow("-w", "web", "--", "true"); r.code == 0 {
		t.Fatalf("a launch beyond max_live ran: %s", r.stderr)
	}
	eventLine(t, events, "LaunchRefused", "Warning", "LaunchRefused",
		"launch refused: WORKSPACE_BUSY: live process limit reached (1 of 1) (attempt -, state not_asked)")
	a.stdin.Close()
	a.wait(t)
}

// An agent the kernel OOM-kills under its scope's memory limit is a
// Warning AgentOOMKilled on its workspace.
func TestAgentOOMKilledEvent(t *testing.T) {
	root := t.TempDir()
	d := startLaunchDaemon(t, launchManifests(root, roomy, launchWorkspace{name: "web", participation: "required", maxLive: 1,
		request: fmt.Sprintf("      memory_bytes: %d\n      minimum: {memory: kernel}\n", 32<<20)}), "web")
	events := d.watchLines("events", "-w", "--for", "workspace/web")
	// tail holds one endless line, and is OOM-killed.
	r := d.runNow("-w", "web", "--", "sh", "-c", "echo $$; head -c 1073741824 /dev/zero | tail -n 1; exit 0")
	if strings.Contains(r.stderr, "RESOURCE_POLICY_UNSUPPORTED") {
		t.Skip("needs a memory controller that marshal can limit a scope with")
	}
	pid := strings.TrimSpace(strings.SplitN(r.stdout, "\n", 2)[0])
	if pid == "" {
		t.Fatalf("the agent printed no pid: exit %d, stderr %s", r.code, r.stderr)
	}
	line := eventLine(t, events, "AgentOOMKilled", "AgentOOMKilled", "pid "+pid+")")
	// The kernel picks the victims: tail first, and at times another
	// process of the scope before tail's memory is freed.
	if !strings.Contains(line, "Warning") || !oomKilled.MatchString(line) {
		t.Errorf("AgentOOMKilled = %q, want a Warning that the agent exited 0 and the kernel OOM-killed 1 process or more", line)
	}
}

// oomKilled matches the end of an AgentOOMKilled message, the count in
// its right number.
var oomKilled = regexp.MustCompile(`exited with status 0; the kernel OOM-killed (1 process|([2-9]|[1-9][0-9]+) processes) of its scope`)
