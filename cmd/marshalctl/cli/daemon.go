package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/marshal-dev/marshal/api/loader"
	"github.com/marshal-dev/marshal/cmd/marshalctl/internal/runner"
	"github.com/marshal-dev/marshal/internal/client"
	"github.com/marshal-dev/marshal/internal/localapi"
)

// globals are the flags every command shares.
type globals struct {
	socket string
}

// client returns a client of the daemon the flags and environment point
// at.
func (g *globals) client() (*client.Client, error) {
	socket, err := localapi.ResolveSocket(g.socket)
	if err != nil {
		return nil, &ExitError{Code: ExitFailure, Err: err}
	}
	return client.New(socket), nil
}

// daemonError turns an error of a request to marshald into the error the
// command ends with: what the daemon said, and what to do next.
func daemonError(err error) error { return runner.DaemonError(err) }

// warnSource prints, one line each, what is wrong with the daemon's
// config dir: files that fail to load, a hold.
func warnSource(w io.Writer, src localapi.SourceStatus) {
	if n := len(src.Errors); n > 0 {
		files := map[string]bool{}
		for _, e := range src.Errors {
			files[e.File] = true
		}
		verb := "fails"
		if len(files) > 1 {
			verb = "fail"
		}
		fmt.Fprintf(w, "warning: %s %s to load (%s); see marshalctl describe / events\n",
			plural(len(files), "manifest file"), verb, manifestError(src.Errors[0]))
	}
	if src.Held {
		what := fmt.Sprintf("went from %s to none", plural(src.HeldObjects, "object"))
		if src.Missing {
			what = "is missing"
		}
		fmt.Fprintf(w, "warning: config dir %s %s, so it is held and nothing was deleted; "+
			"restore it, or confirm with marshalctl apply --allow-empty\n", src.Dir, what)
	}
}

// manifestError writes a load error as the loader does:
// FILE:LINE: KIND "NAME": field.path: message. An error about the request
// rather than a file is its message alone.
func manifestError(e localapi.ManifestError) string {
	if e.File == "" {
		return e.Message
	}
	le := loader.Error{File: e.File, Line: e.Line, Kind: e.Kind, Name: e.Name, Field: e.Field, Message: e.Message}
	return le.Error()
}

// writeManifestErrors prints load errors, one a line, and what happened.
func writeManifestErrors(w io.Writer, errs []localapi.ManifestError, outcome string) {
	var b strings.Builder
	inFiles := 0
	for _, e := range errs {
		b.WriteString(manifestError(e) + "\n")
		if e.File != "" {
			inFiles++
		}
	}
	if inFiles > 0 {
		fmt.Fprintf(&b, "%s: fix the %s above and run again\n", outcome, pluralWord(len(errs), "error"))
	} else {
		b.WriteString(outcome + "\n")
	}
	io.WriteString(w, b.String())
}

func pluralWord(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}
