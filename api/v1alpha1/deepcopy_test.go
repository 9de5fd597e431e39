package v1alpha1

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

// fill sets every exported field reachable from v to a value that is not
// zero: pointers point, slices and maps hold two entries.
func fill(v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(*n))
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", *n))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), n)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fill(v.Index(i), n)
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		for range 2 {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(k, n)
			fill(e, n)
			v.SetMapIndex(k, e)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(int64(*n), 0).UTC()))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), n)
			}
		}
	default:
		panic(fmt.Sprintf("fill: %v is not a kind the API uses", v.Type()))
	}
}

// shared returns the paths at which b shares memory with a.
func shared(a, b reflect.Value, path string) []string {
	var out []string
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() {
			return nil
		}
		if a.Pointer() == b.Pointer() {
			out = append(out, path)
		}
		out = append(out, shared(a.Elem(), b.Elem(), path)...)
	case reflect.Slice:
		if a.Len() > 0 && a.Pointer() == b.Pointer() {
			out = append(out, path)
		}
		for i := range min(a.Len(), b.Len()) {
			out = append(out, shared(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i))...)
		}
	case reflect.Map:
		if !a.IsNil() && a.UnsafePointer() == b.UnsafePointer() {
			out = append(out, path)
		}
		for it := a.MapRange(); it.Next(); {
			if e := b.MapIndex(it.Key()); e.IsValid() {
				out = append(out, shared(it.Value(), e, fmt.Sprintf("%s[%v]", path, it.Key()))...)
			}
		}
	case reflect.Struct:
		for i := range a.NumField() {
			if f := a.Type().Field(i); f.IsExported() {
				out = append(out, shared(a.Field(i), b.Field(i), path+"."+f.Name)...)
			}
		}
	}
	return out
}

// Every kind, and every status a store keeps, copies each field it has,
// sharing nothing: a field added to a type without its line in
// deepcopy.go fails here.
func TestDeepCopy(t *testing.T) {
	cases := map[string]struct {
		in   any
		copy func(in any) any
	}{}
	for _, kind := range Kinds {
		cases[kind] = struct {
			in   any
			copy func(any) any
		}{New(kind), func(in any) any { return in.(Object).DeepCopyObject() }}
	}
	statuses := map[string]struct {
		in   any
		copy func(any) any
	}{
		"ProfileStatus": {new(ProfileStatus), func(in any) any {
			out := new(ProfileStatus)
			in.(*ProfileStatus).DeepCopyInto(out)
			return out
		}},
		"WorkspaceStatus": {new(WorkspaceStatus), func(in any) any {
			out := new(WorkspaceStatus)
			in.(*WorkspaceStatus).DeepCopyInto(out)
			return out
		}},
		"HostStatus": {new(HostStatus), func(in any) any {
			out := new(HostStatus)
			in.(*HostStatus).DeepCopyInto(out)
			return out
		}},
		"ConsumerStatus": {new(ConsumerStatus), func(in any) any {
			out := new(ConsumerStatus)
			in.(*ConsumerStatus).DeepCopyInto(out)
			return out
		}},
		"AgentStatus": {new(AgentStatus), func(in any) any {
			out := new(AgentStatus)
			in.(*AgentStatus).DeepCopyInto(out)
			return out
		}},
	}
	for name, c := range statuses {
		cases[name] = c
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var n int
			fill(reflect.ValueOf(tc.in).Elem(), &n)
			out := tc.copy(tc.in)
			if !reflect.DeepEqual(out, tc.in) {
				t.Errorf("the copy differs:\n got %+v\nwant %+v", out, tc.in)
			}
			for _, p := range shared(reflect.ValueOf(tc.in), reflect.ValueOf(out), name) {
				t.Errorf("the copy shares %s", p)
			}
		})
	}
}

// GetSpec returns the Spec field and ClearStatus zeroes the Status field,
// of every kind.
func TestSpecAndStatusAccessors(t *testing.T) {
	for _, kind := range Kinds {
		t.Run(kind, func(t *testing.T) {
			obj := New(kind)
			var n int
			fill(reflect.ValueOf(obj).Elem(), &n)
			v := reflect.ValueOf(obj).Elem()
			if got, want := obj.GetSpec(), v.FieldByName("Spec").Interface(); !reflect.DeepEqual(got, want) {
				t.Errorf("GetSpec() = %+v, want the Spec field %+v", got, want)
			}
			obj.ClearStatus()
			if st := v.FieldByName("Status"); !st.IsZero() {
				t.Errorf("after ClearStatus, Status = %+v", st.Interface())
			}
			if v.FieldByName("Spec").IsZero() || v.FieldByName("Metadata").IsZero() {
				t.Error("ClearStatus cleared more than the status")
			}
		})
	}
}

// A copy of nil is nil.
func TestDeepCopyNil(t *testing.T) {
	if (*Profile)(nil).DeepCopy() != nil || (*Workspace)(nil).DeepCopy() != nil || (*Host)(nil).DeepCopy() != nil {
		t.Error("DeepCopy of a nil object is not nil")
	}
}
