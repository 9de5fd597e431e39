package cli

import (
	"github.com/spf13/cobra"

	"github.com/marshal-dev/marshal/internal/localapi"
)

const deleteLong = `Delete stops declaring objects: it removes from marshald's config dir the
file that declares each one, whatever its name, when that file declares
nothing else. An object that shares its file with others is refused, with
the file to edit instead.

Name one object as KIND NAME, or every object some manifests declare with
-f FILE|DIR|- (repeatable; checked here first, as apply does). --dry-run
reports what would be done and removes nothing.

What deleting an object means for the host is marshald's to do: a deleted
profile's agents are kept or stopped as its orphans policy says.

Exit status: 0 when everything was deleted, 1 when an object was not found
or was refused (or a manifest is invalid), 2 on a usage error, 3 when a
file cannot be read or marshald cannot be reached.`

func newDeleteCmd(g *globals, s Streams) *cobra.Command {
	var (
		files  []string
		dryRun bool
	)
	cmd := &cobra.Command{
		Use:   "delete KIND NAME | -f FILE|DIR|- [--dry-run]",
		Short: "Stop declaring objects by removing their files from the config dir",
		Long:  deleteLong,
		Example: `  marshalctl delete profile coder
  marshalctl delete -f coder.yaml --dry-run`,
		RunE: func(cmd *cobra.Command, args []string) error {
			req := localapi.DeleteRequest{DryRun: dryRun}
			switch {
			case len(files) > 0 && len(args) > 0:
				return usageError("delete takes KIND NAME or -f, not both")
			case len(files) == 0 && len(args) != 2:
				return usageError("delete needs KIND NAME, or -f FILE|DIR|-")
			case len(files) > 0:
				m, err := readManifests(cmd.Context(), s.In, files)
				if err != nil {
					return &ExitError{Code: ExitFailure, Err: err}
				}
				if len(m.Errors) > 0 {
					writeManifestErrors(s.Err, m.Errors, "nothing was deleted")
					return &ExitError{Code: ExitNo, Silent: true}
				}
				req.Files = m.Files
			default:
				res, err := resourceArg(args[0])
				if err != nil {
					return err
				}
				req.Kind, req.Name = res.Kind, args[1]
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.Delete(cmd.Context(), req)
			if err != nil {
				return daemonError(err)
			}
			if len(res.Errors) > 0 {
				writeManifestErrors(s.Err, res.Errors, "nothing was deleted")
				return &ExitError{Code: ExitNo, Silent: true}
			}
			if writeOutcomes(s, res.Outcomes, res.DryRun) > 0 {
				return &ExitError{Code: ExitNo, Silent: true}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "delete every object these manifests declare: file, directory, or - (repeatable)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "report what would be done; remove nothing")
	return cmd
}
