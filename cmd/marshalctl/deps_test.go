package main

import (
	"os/exec"
	"strings"
	"testing"
)

// marshalctl is the daemon's client, never a piece of it: of this module
// the whole CLI may link only these packages (and what is below them); a
// new one belongs here only when it is neither daemon-side nor heavy.
var mayLink = []string{
	"api/",
	"cmd/marshalctl",
	"internal/cgroupmount", // where the cgroup hierarchies are, for doctor
	"internal/client",
	"internal/identity",
	"internal/localapi",
	"internal/scope",
	"internal/version",
}

// The front starts on every agent launch, so what it links is part of
// what a launch costs: each package's initialisation and pages run
// before the request. It links the client and the run path alone.
var frontMayLink = []string{
	"api/v1alpha1", // the local API's types
	"cmd/marshalctl",
	"cmd/marshalctl/internal/interrupt",
	"cmd/marshalctl/internal/runner",
	"internal/client",
	"internal/localapi",
}

// Neither links net/http: package client speaks HTTP/1.1 itself. The
// front links no command tree, YAML or template either.
func TestLinksNoDaemonPackageAndNoNetHTTP(t *testing.T) {
	checkLinks(t, "./marshalctl-cli", mayLink, "net/http")
	checkLinks(t, ".", frontMayLink, "net/http", "github.com/spf13/cobra", "go.yaml.in/yaml", "sigs.k8s.io/yaml", "text/template", "regexp")
}

// checkLinks fails t when pkg links a package of this module beside
// those allowed, or one of never (or what is below it).
func checkLinks(t *testing.T, pkg string, allowed []string, never ...string) {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go command to list what marshalctl links")
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}}", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	module, err := exec.Command(goTool, "list", "-m", "-f", "{{.Path}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	prefix := strings.TrimSpace(string(module)) + "/"
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps %s listed %d packages: %q", pkg, len(deps), deps)
	}
	below := func(p, root string) bool { return p == root || strings.HasPrefix(p, root+"/") }
	for _, p := range deps {
		for _, n := range never {
			if below(p, n) {
				t.Errorf("%s links %s", pkg, p)
			}
		}
		rel, ours := strings.CutPrefix(p, prefix)
		if !ours {
			continue
		}
		ok := false
		for _, a := range allowed {
			ok = ok || below(rel, strings.TrimSuffix(a, "/"))
		}
		// The front's own packages are named one by one.
		if pkg == "." && rel != "cmd/marshalctl" && below(rel, "cmd/marshalctl") {
			ok = false
			for _, a := range allowed {
				ok = ok || rel == a
			}
		}
		if !ok {
			t.Errorf("%s links %s, which is not among the packages it may link", pkg, p)
		}
	}
}
