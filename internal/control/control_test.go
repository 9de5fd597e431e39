package control

import (
	"errors"
	"strings"
	"testing"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

func TestAuthorize(t *testing.T) {
	agent := Caller{Kind: Agent, Scope: "marshal-coder-0123.scope", Profile: "coder", Workspace: "webapp"}
	granted := agent
	granted.Grant = &v1alpha1.ControlSpec{Run: []string{"tests"}, Allow: []v1alpha1.ControlAction{v1alpha1.ControlStop}, Consumers: []string{"gateway"}}
	stranger := Caller{Kind: Unattributed, Why: "scope_not_launched", Claimed: "marshal-coder-4567.scope"}
	tests := []struct {
		name    string
		caller  Caller
		action  Action
		target  string
		allowed bool
		missing string
	}{
		{"user_applies", Caller{Kind: User}, Apply, "", true, ""},
		{"agent_reads", agent, Read, "", true, ""},
		{"agent_runs_into_its_own_workspace", agent, Run, "webapp", true, ""},
		{"agent_runs_elsewhere", agent, Run, "tests", false, `spec.control.run to name "tests"`},
		{"agent_applies", agent, Apply, "", false, `spec.control.allow to hold "apply"`},
		{"agent_administers", agent, Admin, "", false, `spec.control.allow to hold "admin"`},
		{"agent_presents_a_consumer", agent, Consumer, "gateway", false, `spec.control.consumers to name "gateway"`},
		{"granted_runs_where_named", granted, Run, "tests", true, ""},
		{"granted_runs_elsewhere", granted, Run, "prod", false, `spec.control.run to name "prod"`},
		{"granted_stops", granted, Stop, "", true, ""},
		{"granted_deletes", granted, Delete, "", false, `spec.control.allow to hold "delete"`},
		{"granted_presents_its_consumer", granted, Consumer, "gateway", true, ""},
		{"stranger_reads", stranger, Read, "", true, ""},
		{"stranger_runs_into_the_claimed_profile", stranger, Run, "webapp", false, "it may only read"},
		{"zero_caller_is_no_user", Caller{}, Apply, "", false, "it may only read"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.caller.Authorize(tc.action, tc.target)
			if tc.allowed {
				if err != nil {
					t.Fatalf("Authorize(%s, %q) = %v, want allowed", tc.action, tc.target, err)
				}
				return
			}
			var ref *Refusal
			if !errors.As(err, &ref) {
				t.Fatalf("Authorize(%s, %q) = %v, want a *Refusal", tc.action, tc.target, err)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.missing) || !strings.HasPrefix(msg, "an agent's request was refused") {
				t.Errorf("Authorize(%s, %q) = %q, want it to say %q", tc.action, tc.target, msg, tc.missing)
			}
			if tc.caller.Kind == Agent && !strings.Contains(err.Error(), tc.caller.Scope) {
				t.Errorf("Authorize(%s, %q) = %q, want it to name scope %s", tc.action, tc.target, err, tc.caller.Scope)
			}
		})
	}
}
