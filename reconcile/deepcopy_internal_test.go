package reconcile

import (
	"reflect"
	"testing"
	"time"
)

type node struct {
	Name     string
	Next     *node
	Children []node
	Attrs    map[string][]int
	Any      any
	Fixed    [2]*int
	At       time.Time
	hidden   *int
}

// Types that refer to themselves compile to a finite copier, and every
// reference reachable through exported fields is copied.
func TestDeepCopyRecursiveTypes(t *testing.T) {
	one, two, secret := 1, 2, 3
	in := &node{
		Name:     "root",
		Next:     &node{Name: "next", Attrs: map[string][]int{"a": {1}}},
		Children: []node{{Name: "c0", Any: &node{Name: "in-any"}}},
		Attrs:    map[string][]int{"x": {1, 2}},
		Any:      []int{7},
		Fixed:    [2]*int{&one, &two},
		At:       time.Unix(5, 0),
		hidden:   &secret,
	}
	out := deepCopy(in)
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("deepCopy changed the value:\n got %+v\nwant %+v", out, in)
	}
	out.Next.Attrs["a"][0] = 9
	out.Children[0].Any.(*node).Name = "changed"
	out.Attrs["x"][1] = 9
	out.Any.([]int)[0] = 9
	*out.Fixed[1] = 9
	if in.Next.Attrs["a"][0] != 1 || in.Children[0].Any.(*node).Name != "in-any" ||
		in.Attrs["x"][1] != 2 || in.Any.([]int)[0] != 7 || two != 2 {
		t.Errorf("changing the copy changed the original: %+v", in)
	}
	if out.hidden != in.hidden {
		t.Error("an unexported field was copied deeply; it should be copied as is")
	}
}

func TestDeepCopyValuesAndNils(t *testing.T) {
	type plain struct {
		A int
		B string
		T time.Time
	}
	tests := []struct {
		name string
		in   any
		refs bool
	}{
		{name: "plain_struct", in: plain{A: 1, B: "b"}, refs: false},
		{name: "time", in: time.Unix(1, 0), refs: false},
		{name: "nil_pointer", in: (*node)(nil), refs: true},
		{name: "nil_slice", in: []int(nil), refs: true},
		{name: "nil_map", in: map[string]int(nil), refs: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := hasRefs(reflect.TypeOf(tc.in)); got != tc.refs {
				t.Errorf("hasRefs(%T) = %v, want %v", tc.in, got, tc.refs)
			}
			if got := deepCopy(tc.in); !reflect.DeepEqual(got, tc.in) {
				t.Errorf("deepCopy(%#v) = %#v", tc.in, got)
			}
		})
	}
	var nilIface any
	if got := deepCopy(nilIface); got != nil {
		t.Errorf("deepCopy(nil any) = %v, want nil", got)
	}
}
