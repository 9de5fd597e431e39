package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"k8s.io/client-go/util/jsonpath"

	"github.com/marshal-dev/marshal/internal/localapi"
)

// render applies JSONPath templates to the documents of a RenderRequest,
// as kubectl's -o jsonpath and -o custom-columns printers do: keys that
// are missing print nothing, numbers print as integers when whole.
func (s *Server) render(w http.ResponseWriter, r *http.Request) error {
	var req localapi.RenderRequest
	if err := s.decode(w, r, &req, s.maxBody); err != nil {
		return err
	}
	res, err := renderDocuments(req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, &res)
	return nil
}

func renderDocuments(req localapi.RenderRequest) (localapi.RenderResult, error) {
	var res localapi.RenderResult
	if (req.Template == "") == (len(req.Columns) == 0) {
		return res, apiError(http.StatusBadRequest, localapi.CodeBadRequest, "give a template or columns, one of them")
	}
	docs := make([]any, len(req.Documents))
	for i, d := range req.Documents {
		v, err := unstructured(d)
		if err != nil {
			return res, apiError(http.StatusBadRequest, localapi.CodeBadRequest, "document %d: %v", i, err)
		}
		docs[i] = v
	}
	if req.Template != "" {
		j, err := parseTemplate("template", req.Template)
		if err != nil {
			return res, err
		}
		res.Outputs = make([]string, len(docs))
		for i, d := range docs {
			var b bytes.Buffer
			if err := j.Execute(&b, d); err != nil {
				return res, apiError(http.StatusBadRequest, localapi.CodeBadRequest, "template %s: %v", req.Template, err)
			}
			res.Outputs[i] = b.String()
		}
		return res, nil
	}
	cols := make([]*jsonpath.JSONPath, len(req.Columns))
	for i, c := range req.Columns {
		j, err := parseTemplate(c, c)
		if err != nil {
			return res, err
		}
		cols[i] = j
	}
	res.Cells = make([][]string, len(docs))
	for i, d := range docs {
		row := make([]string, len(cols))
		for k, j := range cols {
			results, err := j.FindResults(d)
			if err != nil {
				return res, apiError(http.StatusBadRequest, localapi.CodeBadRequest, "column %s: %v", req.Columns[k], err)
			}
			var values []string
			for _, rs := range results {
				for _, v := range rs {
					values = append(values, fmt.Sprint(v.Interface()))
				}
			}
			row[k] = "<none>"
			if len(values) > 0 {
				row[k] = strings.Join(values, ",")
			}
		}
		res.Cells[i] = row
	}
	return res, nil
}

// parseTemplate parses a JSONPath template that tolerates missing keys,
// as kubectl's printers do by default.
func parseTemplate(name, text string) (*jsonpath.JSONPath, error) {
	j := jsonpath.New(name).AllowMissingKeys(true)
	if err := j.Parse(text); err != nil {
		return nil, apiError(http.StatusBadRequest, localapi.CodeBadRequest, "template %s: %v", text, err)
	}
	return j, nil
}

// unstructured decodes a JSON document as Kubernetes holds unstructured
// objects: maps, slices, strings, booleans, int64 for whole numbers and
// float64 for others.
func unstructured(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return numbers(v), nil
}

func numbers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = numbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = numbers(e)
		}
	case json.Number:
		if i, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return i
		}
		f, _ := strconv.ParseFloat(string(v), 64)
		return f
	}
	return v
}
