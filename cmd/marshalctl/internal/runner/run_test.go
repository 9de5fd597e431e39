package runner

import (
	"strings"
	"testing"

	"github.com/marshal-dev/marshal/internal/localapi"
)

// A command that is not allowed or not found is named in the refusal, as
// is a workspace that is not ready; other refusals print marshald's
// detail alone.
func TestRunRefusalNamesTheCommand(t *testing.T) {
	tests := []struct {
		code, detail, want string
	}{
		{localapi.RefusalExecNotAllowed, "executable not found", `EXEC_NOT_ALLOWED: executable not found: "claud"`},
		{localapi.RefusalExecNotAllowed, "argv0 not allowed", `EXEC_NOT_ALLOWED: argv0 not allowed: "claud"`},
		{localapi.RefusalWorkspaceNotReady, "workspace not ready", `WORKSPACE_NOT_READY: workspace not ready: "webapp"`},
		{localapi.RefusalWorkspaceNotReady, "workspace not declared", `WORKSPACE_NOT_READY: workspace not declared: "webapp"`},
		{localapi.RefusalResourceUnavailable, "tasks requested 32, free 0 of 4096", `RESOURCE_UNAVAILABLE: tasks requested 32, free 0 of 4096`},
	}
	for _, tc := range tests {
		r := &localapi.Refusal{Code: tc.code, Detail: tc.detail, Process: 7, State: localapi.AttemptNotAsked}
		got, _, _ := strings.Cut(formatRefusal(r, "webapp", []string{"claud", "--resume"}), "\n")
		if got != tc.want {
			t.Errorf("formatRefusal(%s, %s) = %q, want %q", tc.code, tc.detail, got, tc.want)
		}
	}
}
