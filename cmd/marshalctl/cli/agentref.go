package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/marshal-dev/marshal/api/v1alpha1"
)

// agentLister is what resolveAgent needs of the client.
type agentLister interface {
	List(ctx context.Context, kind string) ([]json.RawMessage, error)
}

// resolveAgent turns what a person typed to name an agent into its scope,
// as docker takes a container's ID: the scope itself, as get agents -o
// wide shows it, is taken as typed; otherwise the name get agents shows
// (marshal-coder-3f9a0c1e….scope), the launch's ID or any unique prefix
// of the scope or the ID names the one live agent it matches. No match is
// ExitNo; a prefix that matches several is an error that lists them.
func resolveAgent(ctx context.Context, c agentLister, typed string) (string, error) {
	if strings.HasSuffix(typed, ".scope") && !strings.Contains(typed, shortened) {
		return typed, nil
	}
	items, err := c.List(ctx, "agents")
	if err != nil {
		return "", daemonError(err)
	}
	var matches []string
	for _, raw := range items {
		a, err := decode[v1alpha1.Agent](raw)
		if err != nil {
			return "", err
		}
		if agentMatches(a, typed) {
			matches = append(matches, a.Metadata.Name)
		}
	}
	switch len(matches) {
	case 0:
		return "", &ExitError{Code: ExitNo, Err: fmt.Errorf("no live agent is named %q or has a scope or ID that begins so; marshalctl get agents lists them", typed)}
	case 1:
		return matches[0], nil
	}
	slices.Sort(matches)
	return "", &ExitError{Code: ExitNo, Err: fmt.Errorf("%q names %d agents: %s; give more of the scope or ID",
		typed, len(matches), strings.Join(matches, ", "))}
}

// agentMatches reports whether typed names a: the shortened scope get
// agents shows (the part before the ellipsis a prefix, the part after a
// suffix), or a prefix of the scope, of the launch's ID or of its attempt.
func agentMatches(a *v1alpha1.Agent, typed string) bool {
	name := a.Metadata.Name
	if before, after, ok := strings.Cut(typed, shortened); ok {
		return strings.HasPrefix(name, before) && strings.HasSuffix(name[len(before):], after)
	}
	return strings.HasPrefix(name, typed) ||
		a.Status.ID != "" && strings.HasPrefix(a.Status.ID, typed) ||
		a.Status.Attempt != "" && strings.HasPrefix(a.Status.Attempt, typed)
}
