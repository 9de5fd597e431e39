package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/marshal-dev/marshal/internal/localapi"
)

const applyLong = `Apply declares objects by writing them into marshald's config dir, one file
per object (applied/<kind>-<name>.yaml), where marshald picks them up like
any other edit.

The manifests are first checked here exactly as marshald loads them; when
any fails, every error is printed and nothing is sent. marshald checks them
again, then, per object: creates it when nothing declares it, updates its
applied file when the spec or labels changed, leaves it alone when not.
An object that another file of the config dir declares is refused, with
the file to edit instead: apply never shadows a file someone wrote.

-f is a file, a directory (searched as marshald searches its config dir) or
- for standard input; repeat it for more. --dry-run reports what would be
done and writes nothing.

--allow-empty confirms that a config dir marshald holds because it emptied
at once (or vanished) is meant to be empty: the objects it held are then
deleted. Alone, without -f, it only confirms.

Exit status: 0 when everything was applied, 1 when a manifest is invalid or
an object was refused, 2 on a usage error, 3 when a file cannot be read or
marshald cannot be reached.`

func newApplyCmd(g *globals, s Streams) *cobra.Command {
	var (
		files      []string
		dryRun     bool
		allowEmpty bool
	)
	cmd := &cobra.Command{
		Use:   "apply -f FILE|DIR|- [--dry-run] [--allow-empty]",
		Short: "Declare objects by writing them into marshald's config dir",
		Long:  applyLong,
		Example: `  marshalctl apply -f coder.yaml
  marshalctl apply -f team/ --dry-run
  cat ws.yaml | marshalctl apply -f -
  marshalctl apply --allow-empty        # the emptied config dir is meant to be empty`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(files) == 0 && !allowEmpty {
				return usageError("apply needs -f FILE|DIR|- (or --allow-empty alone, to confirm an emptied config dir)")
			}
			ctx := cmd.Context()
			var m *manifests
			if len(files) > 0 {
				var err error
				if m, err = readManifests(ctx, s.In, files); err != nil {
					return &ExitError{Code: ExitFailure, Err: err}
				}
				if len(m.Errors) > 0 {
					writeManifestErrors(s.Err, m.Errors, "nothing was applied")
					return &ExitError{Code: ExitNo, Silent: true}
				}
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			if m == nil {
				res, err := c.ConfirmEmpty(ctx)
				if err != nil {
					return daemonError(err)
				}
				writeConfirmed(s.Out, res.Released)
				return nil
			}
			res, err := c.Apply(ctx, localapi.ApplyRequest{Files: m.Files, DryRun: dryRun, AllowEmpty: allowEmpty})
			if err != nil {
				return daemonError(err)
			}
			if len(res.Errors) > 0 {
				writeManifestErrors(s.Err, res.Errors, "nothing was applied")
				return &ExitError{Code: ExitNo, Silent: true}
			}
			failed := writeOutcomes(s, res.Outcomes, res.DryRun)
			if allowEmpty {
				writeConfirmed(s.Out, res.Confirmed)
			}
			if failed > 0 {
				return &ExitError{Code: ExitNo, Silent: true}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "manifest file, directory, or - for standard input (repeatable)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "report what would be done; write nothing")
	cmd.Flags().BoolVar(&allowEmpty, "allow-empty", false, "confirm that the emptied config dir marshald holds is meant to be empty")
	return cmd
}

func writeConfirmed(w io.Writer, released bool) {
	if released {
		fmt.Fprintln(w, "config dir confirmed empty: marshald deletes the objects it held")
	} else {
		fmt.Fprintln(w, "nothing to confirm: the config dir is not held")
	}
}

// writeOutcomes prints what apply or delete did, kubectl style:
// "profile/coder created", refusals and misses to stderr with the
// reason. It returns how many objects were refused or not found.
func writeOutcomes(s Streams, outs []localapi.Outcome, dryRun bool) int {
	suffix := ""
	if dryRun {
		suffix = " (dry run)"
	}
	var out, errs strings.Builder
	failed := 0
	for _, o := range outs {
		ref := strings.ToLower(o.Kind) + "/" + o.Name
		switch o.Action {
		case localapi.ActionRefused:
			failed++
			fmt.Fprintf(&errs, "%s refused: %s\n", ref, o.Reason)
		case localapi.ActionNotFound:
			failed++
			fmt.Fprintf(&errs, "%s not found: nothing in the config dir declares it\n", ref)
		default:
			fmt.Fprintf(&out, "%s %s%s\n", ref, o.Action, suffix)
		}
	}
	io.WriteString(s.Out, out.String())
	io.WriteString(s.Err, errs.String())
	return failed
}
