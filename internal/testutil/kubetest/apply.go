package kubetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// resources maps the kinds the tests apply to their resources; true:
// namespaced.
var resources = map[schema.GroupKind]struct {
	resource   string
	namespaced bool
}{
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}: {"customresourcedefinitions", false},
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:         {"clusterroles", false},
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:  {"clusterrolebindings", false},
	{Group: "", Kind: "Namespace"}:                                    {"namespaces", false},
	{Group: "marshal.dev", Kind: "Profile"}:                           {"profiles", false},
	{Group: "marshal.dev", Kind: "Workspace"}:                         {"workspaces", false},
	{Group: "marshal.dev", Kind: "Host"}:                              {"hosts", false},
	{Group: "marshal.dev", Kind: "Consumer"}:                          {"consumers", false},
}

// Resource returns the resource of an object of kind in group.
func Resource(gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool, error) {
	r, ok := resources[gvk.GroupKind()]
	if !ok {
		return schema.GroupVersionResource{}, false, fmt.Errorf("kubetest knows no resource of %s", gvk)
	}
	return gvk.GroupVersion().WithResource(r.resource), r.namespaced, nil
}

// Decode reads the objects of the YAML documents in r.
func Decode(r io.Reader) ([]*unstructured.Unstructured, error) {
	dec := yaml.NewYAMLOrJSONDecoder(r, 4096)
	var out []*unstructured.Unstructured
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(obj) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
}

func apply(ctx context.Context, cfg *rest.Config, files []string) error {
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var crds []string
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		objs, err := Decode(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		for _, obj := range objs {
			if err := Apply(ctx, client, obj); err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			if obj.GetKind() == "CustomResourceDefinition" {
				crds = append(crds, obj.GetName())
			}
		}
	}
	for _, name := range crds {
		if err := established(ctx, client, name); err != nil {
			return err
		}
	}
	return nil
}

// Apply applies obj server-side, as the tests' field manager.
func Apply(ctx context.Context, client dynamic.Interface, obj *unstructured.Unstructured) error {
	gvr, namespaced, err := Resource(obj.GroupVersionKind())
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = client.Resource(gvr)
	if namespaced {
		ri = client.Resource(gvr).Namespace(obj.GetNamespace())
	}
	_, err = ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "kubetest", Force: true})
	if err != nil {
		return fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return nil
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// established waits until the CRD name serves.
func established(ctx context.Context, client dynamic.Interface, name string) error {
	ri := client.Resource(crdResource)
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	list, err := ri.List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return err
	}
	for _, it := range list.Items {
		if isEstablished(&it) {
			return nil
		}
	}
	w, err := ri.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		return err
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if u, ok := ev.Object.(*unstructured.Unstructured); ok && isEstablished(u) {
			return nil
		}
	}
	return fmt.Errorf("CRD %s: watch ended before it was established: %w", name, ctx.Err())
}

func isEstablished(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && strings.EqualFold(fmt.Sprint(m["status"]), "True") {
			return true
		}
	}
	return false
}
