package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newAdminCmd(g *globals, s Streams) *cobra.Command {
	admin := &cobra.Command{
		Use:     "admin",
		Short:   "Administer marshald's state",
		Example: `  marshalctl admin backup /var/backups/marshal-admission.db`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError("unknown admin command %q", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	admin.AddCommand(&cobra.Command{
		Use:   "backup FILE",
		Short: "Write a consistent copy of the admission journal",
		Long: `Backup writes a consistent copy of marshald's admission journal to FILE
while the daemon runs. FILE must not exist; it is written atomically. To
restore, stop marshald, put the copy in place of admission.db in the state
dir, and start it.`,
		Example: `  marshalctl admin backup /var/backups/marshal-admission-$(date +%F).db`,
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			n, err := c.BackupTo(cmd.Context(), args[0])
			if err != nil {
				return daemonError(err)
			}
			fmt.Fprintf(s.Out, "wrote %s (%d bytes)\n", args[0], n)
			return nil
		},
	})
	return admin
}
