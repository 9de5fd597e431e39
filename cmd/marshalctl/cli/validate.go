package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/marshal-dev/marshal/api/loader"
	"github.com/marshal-dev/marshal/api/v1alpha1"
)

const validateLong = `Validate checks manifests exactly as marshald loads them and prints every
error as FILE:LINE: KIND "NAME": field.path: what is wrong.

PATH is a file, a directory (searched recursively for *.yaml, *.yml and
*.json, skipping dotfiles and editor temporaries) or - for standard input.
A file named explicitly is read whatever its extension.

Every kind, field, default and bound is in the manifest reference:
marshalctl validate --reference prints it (docs/manifest-reference.md
holds the same).

Exit status: 0 when every manifest is valid, 1 when any is not, 2 on a
usage error, 3 when a path cannot be read.`

func newValidateCmd(s Streams) *cobra.Command {
	var (
		output    string
		reference bool
	)
	cmd := &cobra.Command{
		Use:   "validate PATH... | --reference",
		Short: "Check manifests the way marshald loads them",
		Long:  validateLong,
		Example: `  marshalctl validate manifests/
  marshalctl validate -o json manifests/ > report.json   # in a pre-merge check
  cat ws.yaml | marshalctl validate -
  marshalctl validate --reference | less`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if reference {
				if len(args) > 0 {
					return usageError("--reference takes no PATH")
				}
				_, err := io.WriteString(s.Out, v1alpha1.Reference)
				return err
			}
			if len(args) == 0 {
				return usageError("%s needs at least 1 argument(s), got 0", cmd.CommandPath())
			}
			if output != "" && output != "json" {
				return usageError("unknown output format %q (want json)", output)
			}
			res, err := loadPaths(cmd, s.In, args)
			if err != nil {
				return &ExitError{Code: ExitFailure, Err: err}
			}
			if output == "json" {
				err = writeValidateJSON(s.Out, res)
			} else {
				err = writeValidateText(s.Out, res)
			}
			if err != nil {
				return err
			}
			if len(res.Errors) > 0 {
				return &ExitError{Code: ExitNo, Silent: true}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json")
	cmd.Flags().BoolVar(&reference, "reference", false, "print the manifest reference (every kind, field, default and bound) and check nothing")
	return cmd
}

// loadPaths loads every path argument and merges them as one config
// directory would be, so conflicts across arguments are reported too.
func loadPaths(cmd *cobra.Command, stdin io.Reader, paths []string) (*loader.Result, error) {
	var files []loader.File
	for _, p := range paths {
		if p == "-" {
			data, err := io.ReadAll(io.LimitReader(stdin, loader.MaxFileSize+1))
			if err != nil {
				return nil, fmt.Errorf("reading standard input: %w", err)
			}
			files = append(files, loader.LoadBytes("<stdin>", data))
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			files = append(files, loader.LoadFile(p))
			continue
		}
		res, err := loader.LoadDir(cmd.Context(), p)
		if err != nil {
			return nil, err
		}
		files = append(files, res.Files...)
	}
	return loader.Merge(files), nil
}

type validateReport struct {
	Valid   bool            `json:"valid"`
	Files   int             `json:"files"`
	Objects []objectRef     `json:"objects"`
	Errors  []*loader.Error `json:"errors"`
}

type objectRef struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	File string `json:"file"`
	Line int    `json:"line"`
}

func writeValidateJSON(w io.Writer, res *loader.Result) error {
	rep := validateReport{
		Valid:   len(res.Errors) == 0,
		Files:   len(res.Files),
		Objects: []objectRef{},
		Errors:  res.Errors,
	}
	if rep.Errors == nil {
		rep.Errors = []*loader.Error{}
	}
	for _, o := range res.Objects {
		rep.Objects = append(rep.Objects, objectRef{
			Kind: o.GetTypeMeta().Kind, Name: o.GetObjectMeta().Name, File: o.File, Line: o.Line,
		})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

func writeValidateText(w io.Writer, res *loader.Result) error {
	var b strings.Builder
	for _, e := range res.Errors {
		b.WriteString(e.Error() + "\n")
	}
	bad := map[string]bool{}
	for _, e := range res.Errors {
		bad[e.File] = true
	}
	if len(res.Errors) == 0 {
		fmt.Fprintf(&b, "valid: %s in %s\n", plural(len(res.Objects), "object"), plural(len(res.Files), "file"))
	} else {
		fmt.Fprintf(&b, "invalid: %s in %s of %s\n", plural(len(res.Errors), "error"), plural(len(bad), "file"), plural(len(res.Files), "file"))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
