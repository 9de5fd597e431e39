package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/marshal-dev/marshal/internal/client"
	"github.com/marshal-dev/marshal/internal/localapi"
)

const deleteLong = `Delete stops declaring objects that marshalctl apply declared: it removes
the file apply wrote for each (applied/<kind>-<name>.yaml in marshald's
config dir). An object declared in any other file is refused, with the
file to edit instead: like apply, delete never changes a file someone
wrote, since the config dir is often a git checkout.

Name objects as KIND NAME…, KIND/NAME…, every applied object of a kind
whose labels match a selector with KIND -l SELECTOR, or every object
some manifests declare with -f FILE|DIR|- (repeatable; checked here
first, as apply does; status and other fields marshald writes are
ignored, so what get -o yaml prints will do). --dry-run reports what
would be done and removes nothing.

An object that nothing declares is not found; --ignore-not-found makes
that no error. With --wait (the default) delete returns once marshald
no longer has the objects, so a get right after does not show them;
--timeout bounds that wait.

What deleting an object means for the host is marshald's to do: a deleted
profile's agents are kept or stopped as its orphans policy says.

Exit status: 0 when everything was deleted, 1 when an object was not found
(without --ignore-not-found) or was refused, a manifest is invalid, or the
wait timed out, 2 on a usage error, 3 when a file cannot be read or
marshald cannot be reached.`

// deleteOptions are delete's flags.
type deleteOptions struct {
	files          []string
	selector       string
	dryRun         bool
	ignoreNotFound bool
	wait           bool
	timeout        time.Duration
}

func newDeleteCmd(g *globals, s Streams) *cobra.Command {
	var o deleteOptions
	cmd := &cobra.Command{
		Use:   "delete KIND NAME…|KIND/NAME…|KIND -l SELECTOR | -f FILE|DIR|- [--dry-run] [--ignore-not-found] [--wait=false]",
		Short: "Stop declaring objects by removing the files apply wrote for them",
		Long:  deleteLong,
		Example: `  marshalctl delete profile coder
  marshalctl delete ws/webapp ws/docs
  marshalctl delete ws -l team=platform
  marshalctl delete -f coder.yaml --dry-run
  marshalctl get ws webapp -o yaml | marshalctl delete -f -`,
		RunE: func(cmd *cobra.Command, args []string) error {
			reqs, err := o.requests(cmd.Context(), s, args)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			return o.run(cmd.Context(), s, c, reqs)
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&o.files, "filename", "f", nil, "delete every object these manifests declare: file, directory, or - (repeatable)")
	f.StringVarP(&o.selector, "selector", "l", "", "delete the objects of KIND whose labels match this selector")
	f.BoolVar(&o.dryRun, "dry-run", false, "report what would be done; remove nothing")
	f.BoolVar(&o.ignoreNotFound, "ignore-not-found", false, "an object that is not found is not an error")
	f.BoolVar(&o.wait, "wait", true, "return once marshald no longer has the deleted objects")
	f.DurationVar(&o.timeout, "timeout", 0, "with --wait, give up waiting after this long; 0 waits as long as it takes")
	return cmd
}

// requests parses delete's arguments and flags into the requests to
// make; a manifest of -f is read and checked here.
func (o *deleteOptions) requests(ctx context.Context, s Streams, args []string) ([]localapi.DeleteRequest, error) {
	if o.timeout < 0 {
		return nil, usageError("--timeout %s: want a duration that is not negative", o.timeout)
	}
	switch {
	case len(o.files) > 0 && (len(args) > 0 || o.selector != ""):
		return nil, usageError("delete takes KIND NAME…, KIND -l SELECTOR or -f, not more than one")
	case len(o.files) > 0:
		m, err := readManifests(ctx, s.In, o.files)
		if err != nil {
			return nil, &ExitError{Code: ExitFailure, Err: err}
		}
		if len(m.Errors) > 0 {
			writeManifestErrors(s.Err, m.Errors, "nothing was deleted")
			return nil, &ExitError{Code: ExitNo, Silent: true}
		}
		return []localapi.DeleteRequest{{Files: m.Files}}, nil
	case len(args) == 0:
		return nil, usageError("delete needs KIND NAME, KIND -l SELECTOR, or -f FILE|DIR|-")
	}
	t, err := parseTargets(args, o.selector)
	if err != nil {
		return nil, err
	}
	var reqs []localapi.DeleteRequest
	switch {
	case len(t.names) > 0:
		for _, n := range t.names {
			reqs = append(reqs, localapi.DeleteRequest{Kind: n.res.Kind, Name: n.name})
		}
	case o.selector == "":
		return nil, usageError("delete needs names, or -l SELECTOR: delete %s NAME", args[0])
	default:
		for _, res := range t.kinds {
			reqs = append(reqs, localapi.DeleteRequest{Kind: res.Kind, Selector: o.selector})
		}
	}
	return reqs, nil
}

// run makes the requests, reports their outcomes and, with --wait, waits
// for marshald to no longer have the deleted objects.
func (o *deleteOptions) run(ctx context.Context, s Streams, c *client.Client, reqs []localapi.DeleteRequest) error {
	var outcomes []localapi.Outcome
	for _, req := range reqs {
		req.DryRun = o.dryRun
		res, err := c.Delete(ctx, req)
		if err != nil {
			return daemonError(err)
		}
		if len(res.Errors) > 0 {
			writeManifestErrors(s.Err, res.Errors, "nothing was deleted")
			return &ExitError{Code: ExitNo, Silent: true}
		}
		outcomes = append(outcomes, res.Outcomes...)
	}
	if o.ignoreNotFound {
		outcomes = slicesDeleteNotFound(outcomes)
	}
	if len(outcomes) == 0 && o.selector != "" {
		fmt.Fprintln(s.Err, "No resources found.")
		return nil
	}
	failed := writeOutcomes(s, outcomes, o.dryRun)
	if o.wait && !o.dryRun {
		if err := awaitDeleted(ctx, s, c, outcomes, o.timeout); err != nil {
			return err
		}
	}
	if failed > 0 {
		return &ExitError{Code: ExitNo, Silent: true}
	}
	return nil
}

// slicesDeleteNotFound drops the objects that were not found.
func slicesDeleteNotFound(outs []localapi.Outcome) []localapi.Outcome {
	kept := outs[:0]
	for _, o := range outs {
		if o.Action != localapi.ActionNotFound {
			kept = append(kept, o)
		}
	}
	return kept
}

// awaitDeleted waits until marshald no longer has the deleted objects,
// unless its config dir is held or this delete emptied it: marshald then
// keeps them until the emptying is confirmed, and it says so.
func awaitDeleted(ctx context.Context, s Streams, c *client.Client, outs []localapi.Outcome, timeout time.Duration) error {
	var gone []namedObject
	for _, o := range outs {
		if o.Action != localapi.ActionDeleted {
			continue
		}
		res, ok := localapi.ResourceFor(o.Kind)
		if !ok {
			continue
		}
		gone = append(gone, namedObject{res: res, name: o.Name})
	}
	if len(gone) == 0 {
		return nil
	}
	info, err := c.Info(ctx)
	if err != nil {
		return daemonError(err)
	}
	if info.Source.Held || info.Source.Objects <= len(gone) {
		fmt.Fprintf(s.Err, "warning: the config dir %s declares nothing else now, so marshald holds its objects "+
			"rather than delete them all; confirm with marshalctl apply --allow-empty\n", info.Source.Dir)
		return nil
	}
	return awaitEach(ctx, c, gone, waitDeleted, timeout, nil)
}
