package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/marshal-dev/marshal/internal/client"
	"github.com/marshal-dev/marshal/internal/localapi"
)

const waitLong = `Wait blocks until a condition holds for each object named, as kubectl wait
does, and prints one line per object when it does.

--for=condition=TYPE waits for the condition TYPE (Ready, Invalid…) to be
True, --for=condition=TYPE=VALUE for it to have that status (False,
Unknown); --for=delete waits until marshald no longer has the object (one
that does not exist already counts). Objects are named as KIND/NAME, as
KIND NAME…, or as KIND -l SELECTOR (those that exist when wait starts).

Wait follows marshald's watch of the kind: it reacts to the change
itself, and asks nothing in between.

Exit status: 0 when the condition holds for every object, 1 when the
timeout expires first, or an object waited on for a condition does not
exist or is deleted, 2 on a usage error, 3 when marshald cannot be
reached.`

// defaultWaitTimeout is kubectl wait's default.
const defaultWaitTimeout = 30 * time.Second

func newWaitCmd(g *globals, s Streams) *cobra.Command {
	var (
		forFlag  string
		selector string
		timeout  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "wait KIND/NAME…|KIND NAME…|KIND -l SELECTOR --for=condition=TYPE[=VALUE]|delete [--timeout D]",
		Short: "Wait until objects meet a condition, or are gone",
		Long:  waitLong,
		Example: `  marshalctl wait --for=condition=Ready workspace/webapp --timeout=30s
  marshalctl wait --for=condition=Invalid=False profile coder
  marshalctl wait --for=delete ws/docs`,
		RunE: func(cmd *cobra.Command, args []string) error {
			cond, err := parseWaitFor(forFlag)
			if err != nil {
				return err
			}
			if timeout < 0 {
				return usageError("--timeout %s: want a duration that is not negative", timeout)
			}
			t, err := parseTargets(args, selector)
			if err != nil {
				return err
			}
			if len(t.names) == 0 && selector == "" {
				return usageError("wait needs objects: KIND/NAME, KIND NAME…, or KIND -l SELECTOR")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			names := t.names
			if selector != "" {
				got, err := t.fetch(ctx, c, selector)
				if err != nil {
					return err
				}
				for _, f := range got {
					for _, item := range f.items {
						names = append(names, namedObject{res: f.res, name: objectName(item)})
					}
				}
				if len(names) == 0 {
					fmt.Fprintln(s.Err, noneFound(t))
					return nil
				}
			}
			return awaitEach(ctx, c, names, cond, timeout, func(o namedObject) {
				fmt.Fprintf(s.Out, "%s %s\n", o.ref(), cond.done)
			})
		},
	}
	cmd.Flags().StringVar(&forFlag, "for", "", "what to wait for: condition=TYPE[=VALUE], or delete (required)")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "wait for every object of KIND whose labels match this selector")
	cmd.Flags().DurationVar(&timeout, "timeout", defaultWaitTimeout, "give up after this long; 0 waits as long as it takes")
	return cmd
}

// waitCondition is a parsed --for.
type waitCondition struct {
	// met reports whether obj, nil when it is gone, meets the condition.
	met func(obj json.RawMessage) (bool, error)
	// done is what wait prints when it is met.
	done string
}

// waitDeleted is --for=delete.
var waitDeleted = waitCondition{met: func(obj json.RawMessage) (bool, error) { return obj == nil, nil }, done: "deleted"}

func parseWaitFor(s string) (waitCondition, error) {
	if s == "delete" {
		return waitDeleted, nil
	}
	spec, ok := strings.CutPrefix(s, "condition=")
	if !ok || spec == "" {
		return waitCondition{}, usageError("--for %q: want condition=TYPE[=VALUE] or delete", s)
	}
	typ, value, hasValue := strings.Cut(spec, "=")
	if !hasValue {
		value = "True"
	}
	if typ == "" || value == "" {
		return waitCondition{}, usageError("--for %q: want condition=TYPE[=VALUE] or delete", s)
	}
	met := func(obj json.RawMessage) (bool, error) {
		if obj == nil {
			return false, errGone
		}
		var v struct {
			Status struct {
				Conditions []struct {
					Type   string `json:"type"`
					Status string `json:"status"`
				} `json:"conditions"`
			} `json:"status"`
		}
		if err := json.Unmarshal(obj, &v); err != nil {
			return false, fmt.Errorf("reading an object from marshald: %w", err)
		}
		for _, c := range v.Status.Conditions {
			if strings.EqualFold(c.Type, typ) {
				return strings.EqualFold(c.Status, value), nil
			}
		}
		return false, nil
	}
	return waitCondition{met: met, done: "condition met"}, nil
}

// awaitEach waits until cond holds for each of objs in turn, calling
// met after each, for timeout at most in all (0: as long as it takes).
func awaitEach(ctx context.Context, c *client.Client, objs []namedObject, cond waitCondition, timeout time.Duration, met func(namedObject)) error {
	wctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	for _, o := range objs {
		if err := awaitObject(wctx, c, o, cond.met); err != nil {
			return waitError(wctx, ctx, err, o, timeout)
		}
		if met != nil {
			met(o)
		}
	}
	return nil
}

// errGone is returned by a condition about an object that does not exist.
var errGone = errors.New("object gone")

// awaitObject follows marshald's watch of o's kind until met, given the
// object or nil once it is gone, reports true. The object is read once
// the watch has started, so no change is missed between the read and
// the events.
func awaitObject(ctx context.Context, c *client.Client, o namedObject, met func(obj json.RawMessage) (bool, error)) error {
	errMet := errors.New("met")
	check := func(obj json.RawMessage) error {
		ok, err := met(obj)
		switch {
		case err != nil:
			return err
		case ok:
			return errMet
		}
		return nil
	}
	err := c.WatchSelected(ctx, o.res.Plural, "", func() error {
		obj, err := c.Get(ctx, o.res.Plural, o.name)
		var apiErr *localapi.Error
		if errors.As(err, &apiErr) && apiErr.Code == localapi.CodeNotFound {
			return check(nil)
		}
		if err != nil {
			return err
		}
		return check(obj)
	}, func(ev localapi.WatchEvent) error {
		if objectName(ev.Object) != o.name {
			return nil
		}
		if ev.Type == localapi.Deleted {
			return check(nil)
		}
		return check(ev.Object)
	})
	if errors.Is(err, errMet) {
		return nil
	}
	return err
}

// waitError is the error a wait for o ends with: ctx is the wait's,
// parent the command's.
func waitError(ctx, parent context.Context, err error, o namedObject, timeout time.Duration) error {
	switch {
	case errors.Is(err, errGone):
		return &ExitError{Code: ExitNo, Err: fmt.Errorf("%s not found: marshald has no such object (marshalctl get %s lists them)", o.ref(), o.res.Plural)}
	case parent.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &ExitError{Code: ExitNo, Err: fmt.Errorf("timed out after %s waiting for %s", timeout, o.ref())}
	case errors.Is(err, client.ErrStreamEnded):
		return watchEnded(parent, err)
	}
	return daemonError(err)
}
