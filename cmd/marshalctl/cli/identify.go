package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/identity"
)

const identifyLong = `Identify says which marshal launch a process belongs to: its profile, its
scope and the launch's id, read from the process's cgroup by the kernel's
own account. Any process of an agent's tree (the git, npm or curl it runs)
resolves to the same launch. It needs no daemon; when marshald answers, the
workspace the agent was launched in and its admission attempt are added,
and a scope marshald did not launch is said to be foreign: its name is
all it has, and marshald counts it as no agent of its profile.

PID defaults to marshalctl's parent: the shell or agent that ran it.

Exit status: 0 when the process is in a marshal scope, 1 when it is not, 2
on a usage error, 3 when there is no such process.`

// launchInfo is what marshald adds to an identity: where the agent was
// launched, its attempt, and whether marshald launched its scope at all.
type launchInfo struct {
	identity.Identity
	Workspace string `json:"workspace,omitempty"`
	Attempt   string `json:"attempt,omitempty"`
	// Launched is whether marshald launched the scope, nil when marshald
	// did not answer or does not list the scope (yet).
	Launched *bool `json:"launched,omitempty"`
}

// lookupLaunch asks marshald, briefly, about the agent of scope; it
// leaves info as it is when the daemon does not answer.
func lookupLaunch(cmd *cobra.Command, g *globals, info *launchInfo) {
	c, err := g.client()
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 500*time.Millisecond)
	defer cancel()
	raw, err := c.Get(ctx, "agents", info.Scope)
	if err != nil {
		return
	}
	var a v1alpha1.Agent
	if json.Unmarshal(raw, &a) != nil {
		return
	}
	// A group of the scope's name elsewhere is not the scope marshald
	// lists under that name.
	launched := a.Status.Launched && (a.Status.Path == "" || a.Status.Path == info.Path)
	info.Launched = &launched
	if launched {
		info.Workspace, info.Attempt = a.Status.Workspace, a.Status.Attempt
	}
}

func newIdentifyCmd(g *globals, s Streams) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "identify [PID]",
		Short: "Say which marshal launch a process belongs to",
		Long:  identifyLong,
		Example: `  marshalctl identify            # the calling shell or agent
  marshalctl identify 48121
  marshalctl identify -o json $$`,
		Args: rangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != "json" {
				return usageError("unknown output format %q (want json)", output)
			}
			pid := os.Getppid()
			if len(args) == 1 {
				n, err := strconv.Atoi(args[0])
				if err != nil || n <= 0 {
					return usageError("PID %q: want a positive process id", args[0])
				}
				pid = n
			}
			id, err := identity.Resolve(pid)
			switch {
			case errors.Is(err, identity.ErrNoProcess):
				return &ExitError{Code: ExitFailure, Err: fmt.Errorf("no process %d: it does not exist or has exited", pid)}
			case errors.Is(err, identity.ErrNotManaged):
				// The error names the cgroups read: "pid N: cgroup …: identity: …".
				where := strings.TrimPrefix(err.Error(), fmt.Sprintf("pid %d: ", pid))
				where = strings.TrimSuffix(where, ": "+identity.ErrNotManaged.Error())
				return &ExitError{Code: ExitNo, Err: fmt.Errorf("process %d is not in a marshal scope (%s); "+
					"only processes started with marshalctl run, and their children, have a marshal identity", pid, where)}
			case err != nil:
				return &ExitError{Code: ExitFailure, Err: err}
			}
			info := launchInfo{Identity: id}
			if !id.Deleted {
				lookupLaunch(cmd, g, &info)
			}
			if output == "json" {
				enc := json.NewEncoder(s.Out)
				enc.SetIndent("", "    ")
				return enc.Encode(info)
			}
			line := fmt.Sprintf("profile %s, scope %s, id %s", id.Profile, id.Scope, id.ID)
			if info.Workspace != "" {
				line += ", workspace " + info.Workspace
			}
			if info.Attempt != "" {
				line += ", attempt " + info.Attempt
			}
			if info.Launched != nil && !*info.Launched {
				line += fmt.Sprintf(" (foreign: marshald did not launch this scope; it is no agent of profile %s)", id.Profile)
			}
			if id.Deleted {
				line += " (its scope is removed: the process has exited)"
			}
			_, err = fmt.Fprintln(s.Out, line)
			return err
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json")
	return cmd
}
