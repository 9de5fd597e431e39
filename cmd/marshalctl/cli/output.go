package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/marshal-dev/marshal/internal/client"
	"github.com/marshal-dev/marshal/internal/localapi"
)

// Output formats of get's -o, as kubectl names them.
const (
	outputTable         = ""
	outputWide          = "wide"
	outputYAML          = "yaml"
	outputJSON          = "json"
	outputName          = "name"
	outputJSONPath      = "jsonpath"
	outputCustomColumns = "custom-columns"
)

// getOutputFormats lists the -o values of get for messages.
const getOutputFormats = "wide, yaml, json, name, jsonpath=TEMPLATE or custom-columns=SPEC"

// output is a parsed -o value. Templates are applied by marshald (see
// localapi.RenderRequest): its parser and engine are client-go's, as
// kubectl's are, and marshalctl does not link them.
type output struct {
	format string
	// template is the template of jsonpath=.
	template string
	// columns are the columns of custom-columns=.
	columns []customColumn
}

// customColumn is one HEADER:PATH of custom-columns, its path made a
// template.
type customColumn struct {
	header string
	path   string
}

// parseOutput reads -o.
func parseOutput(s string) (output, error) {
	format, arg, hasArg := strings.Cut(s, "=")
	switch format {
	case outputTable, outputWide, outputYAML, outputJSON, outputName:
		if !hasArg {
			return output{format: format}, nil
		}
	case outputJSONPath:
		if arg == "" {
			return output{}, usageError("-o jsonpath needs a template: -o jsonpath='{.items[*].metadata.name}'")
		}
		return output{format: format, template: arg}, nil
	case outputCustomColumns:
		if arg == "" {
			return output{}, usageError("-o custom-columns needs HEADER:PATH,…: -o custom-columns=NAME:.metadata.name")
		}
		var cols []customColumn
		for _, spec := range strings.Split(arg, ",") {
			header, path, ok := strings.Cut(spec, ":")
			if !ok || header == "" || path == "" {
				return output{}, usageError("-o custom-columns: %q: want HEADER:PATH, such as NAME:.metadata.name", spec)
			}
			cols = append(cols, customColumn{header: header, path: relaxedPath(path)})
		}
		return output{format: format, columns: cols}, nil
	}
	return output{}, usageError("unknown output format %q (want %s)", s, getOutputFormats)
}

// relaxedPath turns a custom column's path into a template, as kubectl
// does: name.name, .name.name and {.name.name} all mean {.name.name}.
func relaxedPath(p string) string {
	p = strings.TrimSuffix(strings.TrimPrefix(p, "{"), "}")
	return "{." + strings.TrimPrefix(p, ".") + "}"
}

// structured reports whether the output prints documents (yaml, json,
// jsonpath) rather than lines per object.
func (o output) structured() bool {
	return o.format == outputYAML || o.format == outputJSON || o.format == outputJSONPath
}

// printer prints in an output format, asking marshald to apply
// templates.
type printer struct {
	output
	ctx context.Context
	c   *client.Client
}

// document prints one document (an object, or a List) in a structured
// output.
func (p printer) document(w io.Writer, doc any) error {
	if p.format != outputJSONPath {
		return printDocument(w, doc, p.format)
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	res, err := p.c.Render(p.ctx, localapi.RenderRequest{Template: p.template, Documents: []json.RawMessage{data}})
	if err != nil {
		return templateError(err, "-o jsonpath")
	}
	if len(res.Outputs) != 1 {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("marshald rendered %d documents, want 1", len(res.Outputs))}
	}
	_, err = io.WriteString(w, res.Outputs[0])
	return err
}

// customRows are the custom columns' cells of items.
func (p printer) customRows(items []json.RawMessage) ([][]string, error) {
	if len(items) == 0 {
		return nil, nil
	}
	req := localapi.RenderRequest{Documents: items}
	for _, c := range p.columns {
		req.Columns = append(req.Columns, c.path)
	}
	res, err := p.c.Render(p.ctx, req)
	if err != nil {
		return nil, templateError(err, "-o custom-columns")
	}
	if len(res.Cells) != len(items) {
		return nil, &ExitError{Code: ExitFailure, Err: fmt.Errorf("marshald rendered %d rows, want %d", len(res.Cells), len(items))}
	}
	return res.Cells, nil
}

// templateError is the error of a render: a template marshald could not
// parse or apply is a usage error, in the parser's words.
func templateError(err error, flag string) error {
	var apiErr *localapi.Error
	if errors.As(err, &apiErr) && apiErr.Code == localapi.CodeBadRequest {
		return usageError("%s: %s", flag, apiErr.Message)
	}
	return daemonError(err)
}

// customHeader is the header of custom columns.
func (o output) customHeader() []string {
	h := make([]string, len(o.columns))
	for i, c := range o.columns {
		h[i] = c.header
	}
	return h
}

// tabulate returns the table and rows of items of res in p's table
// format: custom columns, or the kind's view (extra says its rows carry
// the view's extra columns). get and get -w both print through it.
func (p printer) tabulate(res localapi.Resource, items []json.RawMessage) (t *table, rows [][]string, extra bool, err error) {
	if p.format == outputCustomColumns {
		if rows, err = p.customRows(items); err != nil {
			return nil, nil, false, err
		}
		return newTable(p.customHeader()...), rows, false, nil
	}
	t, rows, extra, err = views[res.Kind].table(items, p.format == outputWide)
	if err != nil {
		return nil, nil, false, &ExitError{Code: ExitFailure, Err: err}
	}
	return t, rows, extra, nil
}

// row returns obj's row for a table tabulate made of res.
func (p printer) row(res localapi.Resource, obj json.RawMessage, extra bool) ([]string, error) {
	if p.format == outputCustomColumns {
		rows, err := p.customRows([]json.RawMessage{obj})
		if err != nil {
			return nil, err
		}
		return rows[0], nil
	}
	return views[res.Kind].cells(obj, p.format == outputWide, extra)
}

// printNames prints kind/name, one a line, as -o name does.
func printNames(w io.Writer, res localapi.Resource, items []json.RawMessage) error {
	var b strings.Builder
	for _, item := range items {
		b.WriteString(namedObject{res: res, name: objectName(item)}.ref() + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
