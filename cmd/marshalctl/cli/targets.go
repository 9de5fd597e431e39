package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/marshal-dev/marshal/internal/client"
	"github.com/marshal-dev/marshal/internal/localapi"
)

// kindsAll is the argument that names every kind, as kubectl's "all".
const kindsAll = "all"

// targets are the objects the arguments of get, describe and delete name,
// as kubectl reads them: KIND[,KIND…] [NAME…], all, or KIND/NAME….
type targets struct {
	// kinds are the kinds named, in order, without repeats.
	kinds []localapi.Resource
	// names, when not empty, are the objects named, each with its kind;
	// else every object of kinds (that the selector matches) is meant.
	names []namedObject
}

// namedObject is one object named on the command line.
type namedObject struct {
	res  localapi.Resource
	name string
}

// ref is how marshalctl names an object in output: kind/name, the kind
// in lower case, as apply and -o name print it.
func (o namedObject) ref() string { return strings.ToLower(o.res.Kind) + "/" + o.name }

// parseTargets reads args. selector is the -l value, which excludes
// names, as in kubectl.
func parseTargets(args []string, selector string) (targets, error) {
	var t targets
	if len(args) == 0 {
		return t, usageError("name a kind: %s, or %s", resourceNames(), kindsAll)
	}
	seen := map[string]bool{}
	addKind := func(res localapi.Resource) {
		if !seen[res.Kind] {
			seen[res.Kind] = true
			t.kinds = append(t.kinds, res)
		}
	}
	if strings.Contains(args[0], "/") {
		for _, a := range args {
			kind, name, ok := strings.Cut(a, "/")
			if !ok || kind == "" || name == "" {
				return t, usageError("%q: after a KIND/NAME argument, every argument must be KIND/NAME", a)
			}
			res, err := resourceArg(kind)
			if err != nil {
				return t, err
			}
			addKind(res)
			t.names = append(t.names, namedObject{res: res, name: name})
		}
	} else {
		for _, k := range strings.Split(args[0], ",") {
			if k == kindsAll {
				for _, res := range localapi.Resources {
					addKind(res)
				}
				continue
			}
			res, err := resourceArg(k)
			if err != nil {
				return t, err
			}
			addKind(res)
		}
		if names := args[1:]; len(names) > 0 {
			if len(t.kinds) != 1 {
				return t, usageError("names need exactly one kind, got %s; name several kinds' objects as KIND/NAME", args[0])
			}
			for _, n := range names {
				t.names = append(t.names, namedObject{res: t.kinds[0], name: n})
			}
		}
	}
	if selector != "" && len(t.names) > 0 {
		return t, usageError("a selector (-l) and names exclude each other")
	}
	return t, nil
}

// single reports whether the targets are one object named, which get
// prints as itself rather than as a list.
func (t targets) single() bool { return len(t.names) == 1 }

// fetched are the objects of one kind, as marshald sent them.
type fetched struct {
	res   localapi.Resource
	items []json.RawMessage
}

// fetch returns the objects the targets name, by kind in order: the
// named ones (a missing one is an error, ExitNo), or every one of each
// kind that selector matches.
func (t targets) fetch(ctx context.Context, c *client.Client, selector string) ([]fetched, error) {
	if len(t.names) == 0 {
		out := make([]fetched, 0, len(t.kinds))
		for _, res := range t.kinds {
			items, err := c.ListSelected(ctx, res.Plural, selector)
			if err != nil {
				return nil, selectorError(err)
			}
			out = append(out, fetched{res: res, items: items})
		}
		return out, nil
	}
	var out []fetched
	for _, n := range t.names {
		obj, err := c.Get(ctx, n.res.Plural, n.name)
		if err != nil {
			return nil, notFoundHint(daemonError(err), n.res)
		}
		if len(out) == 0 || out[len(out)-1].res.Kind != n.res.Kind {
			out = append(out, fetched{res: n.res})
		}
		out[len(out)-1].items = append(out[len(out)-1].items, obj)
	}
	return out, nil
}

// noneFound is what get and describe say when nothing matched: kubectl's
// words, with the kind when there is one.
func noneFound(t targets) string {
	if len(t.kinds) == 1 {
		return fmt.Sprintf("No %s found.", t.kinds[0].Plural)
	}
	return "No resources found."
}

// selectorError is the error of a list with a selector: one marshald
// could not parse is a usage error, in the parser's words.
func selectorError(err error) error {
	var apiErr *localapi.Error
	if errors.As(err, &apiErr) && apiErr.Code == localapi.CodeBadRequest {
		return usageError("%s", apiErr.Message)
	}
	return daemonError(err)
}
