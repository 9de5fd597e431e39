package policy

import (
	"testing"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

func TestDecideName(t *testing.T) {
	issue := mustCompile(t, issueSpec)
	onlyGitHub := mustCompile(t, &v1alpha1.EgressSpec{Rules: []v1alpha1.EgressRule{
		{Action: v1alpha1.EgressDeny, Hosts: []string{"gist.github.com"}},
		{Action: v1alpha1.EgressAllow, Hosts: []string{"*.github.com"}, Ports: []int32{443}},
	}})
	denyAllElse := mustCompile(t, &v1alpha1.EgressSpec{Default: v1alpha1.EgressAllow, Rules: []v1alpha1.EgressRule{
		{Action: v1alpha1.EgressAllow, Hosts: []string{"ok.test"}, Ports: []int32{443}},
		{Action: v1alpha1.EgressDeny},
	}})
	tests := []struct {
		name   string
		pol    *Policy
		host   string
		allow  bool
		rule   int
		reason Reason
	}{
		{"exact", issue, "github.com", true, 0, ReasonRule},
		{"any_name_on_some_port", issue, "anything.org", true, 4, ReasonRule},
		{"wildcard", onlyGitHub, "api.github.com", true, 1, ReasonRule},
		{"deny_rule_first_on_every_port", onlyGitHub, "gist.github.com", false, 0, ReasonRule},
		{"no_rule", onlyGitHub, "example.org", false, -1, ReasonDefault},
		{"apex_not_in_wildcard", onlyGitHub, "github.com", false, -1, ReasonDefault},
		{"named_before_deny_all", denyAllElse, "ok.test", true, 0, ReasonRule},
		{"deny_all_before_default", denyAllElse, "other.test", false, 1, ReasonRule},
		{"allow_all", AllowAll, "x.test", true, -1, ReasonDefault},
		{"deny_all", DenyAll, "x.test", false, -1, ReasonDefault},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.pol.DecideName(tc.host)
			want := Decision{Allow: tc.allow, Rule: tc.rule, Reason: tc.reason}
			if got != want {
				t.Errorf("DecideName(%q) = %+v, want %+v", tc.host, got, want)
			}
		})
	}
}
