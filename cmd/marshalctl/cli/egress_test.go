package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/marshal-dev/marshal/internal/localapi"
	"github.com/marshal-dev/marshal/internal/testutil"
)

func init() { egressZone = time.UTC }

func egressFixture(h *harness) {
	rule := 0
	scope := "marshal-coder-" + agentID + ".scope"
	for _, r := range []localapi.EgressRecord{
		{Time: ago(3 * time.Minute), Scope: scope, Profile: "coder", Workspace: "webapp", Attempt: agentID, PID: 48121, Command: "git",
			Transport: "tcp", Protocol: "connect", Host: "github.com", Port: 443, Address: "140.82.112.3:443",
			Verdict: "allow", Rule: &rule, Reason: "rule", BytesOut: 2100, BytesIn: 42 << 10, Duration: localapi.Milliseconds(1500 * time.Millisecond)},
		{Time: ago(2 * time.Minute), Scope: scope, Profile: "coder", Workspace: "webapp", Attempt: agentID, PID: 48200, Command: "curl",
			Transport: "tcp", Protocol: "connect", Host: "evil.example", Port: 443, Verdict: "deny", Reason: "default"},
		{Time: ago(90 * time.Second), Scope: scope, Profile: "coder", Workspace: "webapp", Attempt: agentID, PID: 48150, Command: "marshal-bridge",
			Transport: "unix", Protocol: "dns", Host: "evil.example", Verdict: "deny", Reason: "default"},
		{Time: ago(time.Minute), Scope: scope, Profile: "coder", Workspace: "webapp", Attempt: agentID, PID: 48200, Command: "curl",
			Transport: "tcp", Protocol: "http", Host: "169.254.169.254", Port: 80, Address: "169.254.169.254:80", Verdict: "deny", Reason: "private_range"},
		{Time: ago(25 * time.Hour), Unscoped: "no_scope", Transport: "tcp", Protocol: "socks5", Host: "::1", Port: 22,
			Verdict: "deny", Reason: "unscoped"},
		{Time: ago(30 * time.Second), Scope: "marshal-writer-0123456789abcdef0123456789abcdef.scope", Profile: "writer", Workspace: "docs",
			Transport: "unix", Protocol: "socks5", Host: "pypi.org", Port: 443, Verdict: "error", Error: "dns_failed"},
	} {
		h.d.AddEgress(r)
	}
}

func TestEgressLogGolden(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"egress_log", []string{"egress", "log"}},
		{"egress_log_workspace", []string{"egress", "log", "--workspace", "webapp", "--tail", "2"}},
		{"egress_log_json", []string{"egress", "log", "--profile", "writer", "-o", "json"}},
		{"egress_log_bad_output", []string{"egress", "log", "-o", "yaml"}},
		{"egress_log_bad_tail", []string{"egress", "log", "--tail", "-3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			egressFixture(h)
			r := h.run(t, "", tc.args...)
			golden(t, tc.name, r.transcript(tc.args, h.socket, "$SOCKET"))
		})
	}
	t.Run("egress_log_empty", func(t *testing.T) {
		h := newHarness(t)
		r := h.run(t, "", "egress", "log")
		golden(t, "egress_log_empty", r.transcript([]string{"egress", "log"}, h.socket, "$SOCKET"))
	})
	t.Run("egress_log_no_proxy", func(t *testing.T) {
		h := newHarness(t)
		h.d.NoEgressProxy()
		r := h.run(t, "", "egress", "log")
		if r.code != ExitFailure || !strings.Contains(r.stderr, "NOT_SUPPORTED") {
			t.Errorf("without a proxy: %+v", r)
		}
	})
}

func TestEgressLogFollows(t *testing.T) {
	h := newHarness(t)
	egressFixture(h)
	out, stop := h.background(t, "egress", "log", "-f", "--profile", "coder", "--tail", "1")
	testutil.Eventually(t, out.wrote, func() bool { return strings.Contains(out.String(), "169.254.169.254:80") }, "the last record of coder")
	h.d.AddEgress(localapi.EgressRecord{Time: now, Profile: "coder", Scope: "marshal-coder-" + agentID + ".scope",
		Transport: "tcp", Protocol: "connect", Host: "later.example", Port: 443, Verdict: "deny", Reason: "default"})
	testutil.Eventually(t, out.wrote, func() bool { return strings.Contains(out.String(), "later.example:443") }, "the new record")
	if r := stop(); r.code != 0 {
		t.Errorf("egress log -f after interrupt: %+v, want exit 0", r)
	}
	if got := out.String(); strings.Contains(got, "github.com") || strings.Count(got, "\n") != 3 {
		t.Errorf("followed output:\n%s\nwant the header, the last record of coder and the new one", got)
	}
}
