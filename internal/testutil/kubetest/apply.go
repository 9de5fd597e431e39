package kubetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	sigsyaml "sigs.k8s.io/yaml"
)

// resources maps the kinds the tests apply to their resources; true:
// namespaced.
var resources = map[schema.GroupKind]struct {
	resource   string
	namespaced bool
}{
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:                 {"customresourcedefinitions", false},
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                         {"clusterroles", false},
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                  {"clusterrolebindings", false},
	{Group: "rbac.authorization.k8s.io", Kind: "Role"}:                                {"roles", true},
	{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}:                         {"rolebindings", true},
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        {"validatingadmissionpolicies", false},
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: {"validatingadmissionpolicybindings", false},
	{Group: "", Kind: "Namespace"}:                                                    {"namespaces", false},
	{Group: "marshal.dev", Kind: "Profile"}:                                           {"profiles", false},
	{Group: "marshal.dev", Kind: "Workspace"}:                                         {"workspaces", false},
	{Group: "marshal.dev", Kind: "Host"}:                                              {"hosts", false},
	{Group: "marshal.dev", Kind: "Consumer"}:                                          {"consumers", false},
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

// Kustomization returns the files the kustomization.yaml of dir lists as
// its resources, as kubectl apply -k would apply them, so that tests
// install what a user installs.
func Kustomization(dir string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := sigsyaml.Unmarshal(b, &k); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	files := make([]string, len(k.Resources))
	for i, r := range k.Resources {
		files[i] = filepath.Join(dir, r)
	}
	return files, nil
}

// apply applies the objects of files and waits until they are in force.
func (s *Server) apply(ctx context.Context, files []string) error {
	client, err := dynamic.NewForConfig(s.Admin())
	if err != nil {
		return err
	}
	var crds []string
	policies := false
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
			switch obj.GetKind() {
			case "CustomResourceDefinition":
				crds = append(crds, obj.GetName())
			case "ValidatingAdmissionPolicyBinding":
				policies = true
			}
		}
	}
	for _, name := range crds {
		if err := established(ctx, client, name); err != nil {
			return err
		}
	}
	if policies {
		return s.hostRestrictionInForce(ctx)
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

// Wait watches the object name of gvr (in namespace ns, "" for a
// cluster-scoped one) until it exists and cond holds for it, and returns
// it. When ctx ends first, it returns the last version seen (nil: none)
// and ctx's error.
func Wait(ctx context.Context, client dynamic.Interface, gvr schema.GroupVersionResource, ns, name string, cond func(*unstructured.Unstructured) bool) (*unstructured.Unstructured, error) {
	ri := client.Resource(gvr).Namespace(ns)
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	var last *unstructured.Unstructured
	for ctx.Err() == nil {
		list, err := ri.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			continue
		}
		last = nil
		if len(list.Items) > 0 {
			last = &list.Items[0]
		}
		if last != nil && cond(last) {
			return last, nil
		}
		w, err := ri.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.GetResourceVersion()})
		if err != nil {
			continue
		}
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			last = u
			if ev.Type == "DELETED" {
				last = nil
			}
			if last != nil && cond(last) {
				w.Stop()
				return last, nil
			}
		}
		w.Stop()
	}
	return last, ctx.Err()
}
