package cli

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/marshal-dev/marshal/internal/localapi"
)

const completionLong = `Completion prints a script that lets your shell complete marshalctl's
commands, flags and kinds, and the names of the objects marshald knows,
when you press TAB.

bash (the script needs the bash-completion package):

  source <(marshalctl completion bash)                  # this shell only
  mkdir -p ~/.local/share/bash-completion/completions   # every new shell
  marshalctl completion bash > ~/.local/share/bash-completion/completions/marshalctl

zsh:

  source <(marshalctl completion zsh)                   # this shell only
  mkdir -p ~/.zfunc                                     # every new shell
  marshalctl completion zsh > ~/.zfunc/_marshalctl
  # and in ~/.zshrc, before compinit: fpath=(~/.zfunc $fpath)

fish:

  marshalctl completion fish | source                   # this shell only
  marshalctl completion fish > ~/.config/fish/completions/marshalctl.fish

For every user of the machine, write the scripts to
/usr/share/bash-completion/completions/marshalctl,
/usr/local/share/zsh/site-functions/_marshalctl and
/usr/share/fish/vendor_completions.d/marshalctl.fish instead.

Object names are asked of marshald as you press TAB; when it is not
running, commands, kinds and flags still complete, and nothing is printed.

Exit status: 0 on success, 2 on a usage error.`

// shells are the shells completion writes scripts for.
var shells = []string{"bash", "zsh", "fish"}

func newCompletionCmd(s Streams) *cobra.Command {
	var noDescriptions bool
	cmd := &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print the shell completion script for bash, zsh or fish",
		Long:  completionLong,
		Example: `  source <(marshalctl completion bash)
  marshalctl completion zsh > ~/.zfunc/_marshalctl
  marshalctl completion fish > ~/.config/fish/completions/marshalctl.fish`,
		ValidArgs: shells,
		Args:      exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(s.Out, !noDescriptions)
			case "zsh":
				if noDescriptions {
					return root.GenZshCompletionNoDesc(s.Out)
				}
				return root.GenZshCompletion(s.Out)
			case "fish":
				return root.GenFishCompletion(s.Out, !noDescriptions)
			}
			return usageError("unknown shell %q (want bash, zsh or fish)", args[0])
		},
	}
	cmd.Flags().BoolVar(&noDescriptions, "no-descriptions", false, "complete without a description beside each choice")
	return cmd
}

// completionTimeout bounds how long a completion waits for marshald: at a
// prompt, no names are better than a hung TAB.
var completionTimeout = 2 * time.Second

// outputFormats are the values of each command's -o flag.
var outputFormats = map[string][]string{
	"get":      {"wide", "yaml", "json", "name"},
	"identify": {"json"},
	"validate": {"json"},
	"version":  {"json"},
}

// manifestExts are the extensions of manifest files, for file completion.
var manifestExts = []string{"yaml", "yml", "json"}

// addCompletions gives the commands of root their completions: kinds and
// object names for the arguments of get, describe and delete, object
// references for events --for, the values of -o, and manifest files for
// -f and validate. It runs after every command was added.
func addCompletions(root *cobra.Command, g *globals) {
	for _, cmd := range root.Commands() {
		switch cmd.Name() {
		case "get":
			cmd.ValidArgsFunction = g.completeKindAndName
		case "describe", "stop", "kill":
			cmd.ValidArgsFunction = g.completeKindAndName
		case "delete":
			cmd.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				if cmd.Flags().Changed("filename") {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return g.completeKindAndName(cmd, args, toComplete)
			}
		case "events":
			mustRegister(cmd.RegisterFlagCompletionFunc("for", g.completeObjectRef))
		case "validate":
			cmd.ValidArgsFunction = func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
				return manifestExts, cobra.ShellCompDirectiveFilterFileExt
			}
		}
		if cmd.Flags().Lookup("filename") != nil {
			mustRegister(cmd.MarkFlagFilename("filename", manifestExts...))
		}
		if formats, ok := outputFormats[cmd.Name()]; ok {
			mustRegister(cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp)))
		}
		if cmd.ValidArgsFunction == nil && cmd.ValidArgs == nil {
			// identify's PID, and the commands that take no argument:
			// nothing to offer, and files would be wrong.
			cmd.ValidArgsFunction = cobra.NoFileCompletions
		}
	}
}

// mustRegister panics when a completion names a flag a command does not
// have: a mistake of this file that every test run would show.
func mustRegister(err error) {
	if err != nil {
		panic("marshalctl completion: " + err.Error())
	}
}

// completeKindAndName completes KIND, then NAME from marshald.
func (g *globals) completeKindAndName(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	switch len(args) {
	case 0:
		return kindCompletions(toComplete, ""), cobra.ShellCompDirectiveNoFileComp
	case 1:
		res, ok := localapi.ResourceFor(args[0])
		if !ok {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return g.nameCompletions(cmd.Context(), res, toComplete, ""), cobra.ShellCompDirectiveNoFileComp
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}

// completeObjectRef completes KIND/NAME: first the kind and its slash,
// then the names of that kind from marshald.
func (g *globals) completeObjectRef(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	kind, name, ok := strings.Cut(toComplete, "/")
	if !ok {
		return kindCompletions(toComplete, "/"), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
	res, ok := localapi.ResourceFor(kind)
	if !ok {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return g.nameCompletions(cmd.Context(), res, name, kind+"/"), cobra.ShellCompDirectiveNoFileComp
}

// kindCompletions returns every name of every kind that starts with
// prefix, plural first, each followed by suffix and described by its kind.
func kindCompletions(prefix, suffix string) []cobra.Completion {
	var out []cobra.Completion
	for _, r := range localapi.Resources {
		for _, name := range append([]string{r.Plural}, r.Short...) {
			if strings.HasPrefix(name, prefix) {
				out = append(out, cobra.CompletionWithDesc(name+suffix, r.Kind))
			}
		}
	}
	return out
}

// nameCompletions returns the names of the objects of res that start with
// prefix, each after before. It asks marshald, for completionTimeout at
// most, and returns nothing when marshald cannot answer: a completion
// never prints an error.
func (g *globals) nameCompletions(ctx context.Context, res localapi.Resource, prefix, before string) []cobra.Completion {
	c, err := g.client()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	items, err := c.List(ctx, res.Plural)
	if err != nil {
		cobra.CompDebugln("listing "+res.Plural+": "+err.Error(), false)
		return nil
	}
	var out []cobra.Completion
	for _, item := range items {
		if name := objectName(item); name != "" && strings.HasPrefix(name, prefix) {
			out = append(out, before+name)
		}
	}
	return out
}
