package runner

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/marshal-dev/marshal/internal/client"
	"github.com/marshal-dev/marshal/internal/localapi"
)

// Exit codes shared by every command.
const (
	ExitOK      = 0 // success
	ExitNo      = 1 // the command worked and the answer is no: invalid manifests, differences
	ExitUsage   = 2 // wrong flags or arguments
	ExitFailure = 3 // the command could not do its work (unreadable input, daemon unreachable)
)

// Streams are a command's standard input, output and error.
type Streams struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// ExitError carries the exit code a command ends with. Its message has
// already been printed when Silent is set.
type ExitError struct {
	Code   int
	Err    error
	Silent bool
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// UsageError is a usage error with its message.
func UsageError(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// ExitCode maps the error a command returned to the process exit code.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return ExitFailure
}

// DaemonError maps an error talking to marshald to an exit code and a
// message for the user.
func DaemonError(err error) error {
	var ee *ExitError
	if err == nil || errors.As(err, &ee) {
		return err
	}
	var apiErr *localapi.Error
	switch {
	case errors.Is(err, context.Canceled):
		return &ExitError{Code: ExitFailure, Err: errors.New("interrupted")}
	case errors.Is(err, client.ErrUnreachable):
		return &ExitError{Code: ExitFailure, Err: err}
	case errors.As(err, &apiErr):
		switch apiErr.Code {
		case localapi.CodeNotFound:
			return &ExitError{Code: ExitNo, Err: errors.New(apiErr.Message)}
		case localapi.CodeForbidden:
			return &ExitError{Code: ExitFailure, Err: fmt.Errorf("marshald refused: %s", apiErr.Message)}
		case localapi.CodeUnavailable:
			return &ExitError{Code: ExitFailure, Err: fmt.Errorf("marshald cannot answer now: %s; try again in a moment", apiErr.Message)}
		}
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("marshald: %s: %s", apiErr.Code, apiErr.Message)}
	}
	return &ExitError{Code: ExitFailure, Err: err}
}

// OrDash writes "-" for an empty value.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Report prints err as a command ends with it: "marshalctl: ERR", and
// where the usage is for a usage error. A silent error's message was
// printed already.
func Report(w io.Writer, err error) {
	var ee *ExitError
	if err == nil || errors.As(err, &ee) && ee.Silent {
		return
	}
	fmt.Fprintf(w, "marshalctl: %v\n", err)
	if ExitCode(err) == ExitUsage {
		fmt.Fprintln(w, "Run 'marshalctl --help' for usage.")
	}
}
