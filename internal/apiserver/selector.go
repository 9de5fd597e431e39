package apiserver

import (
	"context"
	"net/http"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/marshal-dev/marshal/api/v1alpha1"
	"github.com/marshal-dev/marshal/internal/localapi"
)

// requestSelector parses the request's label selector, as Kubernetes'
// API server parses labelSelector; an absent one selects everything.
// The client sends the text as the user wrote it, so that marshalctl
// need not link the parser.
func requestSelector(r *http.Request) (labels.Selector, error) {
	text := r.URL.Query().Get(localapi.SelectorParam)
	if text == "" {
		return labels.Everything(), nil
	}
	sel, err := labels.Parse(text)
	if err != nil {
		return nil, apiError(http.StatusBadRequest, localapi.CodeBadRequest, "label selector %q: %v", text, err)
	}
	return sel, nil
}

// listSelected is the daemon's List of kind narrowed to the objects sel
// matches.
func (s *Server) listSelected(ctx context.Context, kind string, sel labels.Selector) ([]any, error) {
	items, err := s.d.List(ctx, kind)
	if err != nil || sel.Empty() {
		return items, err
	}
	kept := items[:0:0]
	for _, item := range items {
		if sel.Matches(labels.Set(labelsOf(item))) {
			kept = append(kept, item)
		}
	}
	return kept, nil
}

// labelsOf returns an object's labels; an agent has none.
func labelsOf(item any) map[string]string {
	if o, ok := item.(v1alpha1.Object); ok {
		return o.GetObjectMeta().Labels
	}
	return nil
}
