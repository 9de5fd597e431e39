package main

import (
	"os/exec"
	"strings"
	"testing"
)

// marshalctl starts on every agent launch, so what it links is part of
// what a launch costs; and it is the daemon's client, never a piece of
// it. Of this module it may link only these packages (and what is below
// them); a new one belongs here only when it is neither daemon-side nor
// heavy.
var mayLink = []string{
	"api/",
	"cmd/marshalctl",
	"internal/cgroupmount", // where the cgroup hierarchies are, for doctor
	"internal/client",
	"internal/identity",
	"internal/localapi",
	"internal/quantity", // bytes as people read them, as marshald writes them
	"internal/rawfile",  // /proc files read with the system calls alone, for identity
	"internal/scope",
	"internal/version",
}

// It never links net/http: package client speaks HTTP/1.1 itself.
func TestLinksNoDaemonPackageAndNoNetHTTP(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go command to list what marshalctl links")
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	module, err := exec.Command(goTool, "list", "-m", "-f", "{{.Path}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	prefix := strings.TrimSpace(string(module)) + "/"
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed %d packages: %q", len(deps), deps)
	}
	for _, p := range deps {
		if p == "net/http" || strings.HasPrefix(p, "net/http/") {
			t.Errorf("marshalctl links %s", p)
		}
		rel, ours := strings.CutPrefix(p, prefix)
		if !ours {
			continue
		}
		allowed := false
		for _, a := range mayLink {
			if rel == strings.TrimSuffix(a, "/") || strings.HasPrefix(rel, strings.TrimSuffix(a, "/")+"/") {
				allowed = true
			}
		}
		if !allowed {
			t.Errorf("marshalctl links %s, which is not among the packages it may link", p)
		}
	}
}
