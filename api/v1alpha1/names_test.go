package v1alpha1

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
	"pgregory.net/rapid"
)

// The name checks must judge and explain exactly as apimachinery's do:
// the loader's golden files and kubectl users see these messages.

// nameChecks pairs each check with the apimachinery function it replaces.
var nameChecks = []struct {
	name string
	ours func(string) []string
	k8s  func(string) []string
}{
	{"dns1123_label", isDNS1123Label, validation.IsDNS1123Label},
	{"qualified_name", isQualifiedName, validation.IsQualifiedName},
	{"label_value", isLabelValue, validation.IsValidLabelValue},
}

// trickyNames are the inputs at each rule's edges.
var trickyNames = []string{
	"", "a", "A", "0", "-", "_", ".", "/", "//", "a/", "/a", "a//b", "a/b/c",
	"my-name", "123-abc", "-a", "a-", "a--b", "a_b", "a.b", ".a", "a.", "a..b",
	"MyName", "my.name", "my_value", "12345", "Ab", "aB", "a b", " a", "a ",
	"a\n", "\na", "a\x00", "é", "aé", "éa", "a\xffb", "\xff", "a\u212a", // Kelvin sign folds to k
	"example.com/MyName", "example.com/", "Example.com/a", "example..com/a",
	"-example.com/a", "example.com-/a", "a.b.c/d", "a_b.com/c", "a/_b", "a/b_",
	strings.Repeat("a", 62), strings.Repeat("a", 63), strings.Repeat("a", 64),
	strings.Repeat("a", 63) + ".b", strings.Repeat("A", 64), strings.Repeat("-", 64),
	strings.Repeat("a.", 31) + "a", strings.Repeat("a.", 32) + "a",
	strings.Repeat("a", 253) + "/b", strings.Repeat("a", 254) + "/b",
	strings.Repeat("a.", 126) + "a/b", strings.Repeat("a.", 127) + "a/b",
	"a/" + strings.Repeat("b", 63), "a/" + strings.Repeat("b", 64),
	"/" + strings.Repeat("b", 64), strings.Repeat("-", 254) + "/",
}

func TestNameChecksMatchApimachinery(t *testing.T) {
	for _, c := range nameChecks {
		t.Run(c.name, func(t *testing.T) {
			for _, in := range trickyNames {
				if got, want := c.ours(in), c.k8s(in); !sameMessages(got, want) {
					t.Errorf("%s(%q) = %q, want %q", c.name, in, got, want)
				}
			}
		})
	}
}

// namePieces are what generated names are made of: each byte class the
// rules tell apart, and runs that cross the length limits.
var namePieces = []string{
	"a", "z", "0", "9", "A", "Z", "-", "_", ".", "/", " ", "é", "\xff", "\x00",
	strings.Repeat("a", 31), strings.Repeat("b", 63), strings.Repeat("c.", 60),
}

func TestNameChecksMatchApimachineryProperty(t *testing.T) {
	pieces := rapid.Custom(func(t *rapid.T) string {
		return strings.Join(rapid.SliceOfN(rapid.SampledFrom(namePieces), 0, 12).Draw(t, "pieces"), "")
	})
	names := rapid.OneOf(pieces, rapid.String(), rapid.StringMatching(`[-a-zA-Z0-9_./]{0,70}`))
	for _, c := range nameChecks {
		t.Run(c.name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				in := names.Draw(t, "name")
				if got, want := c.ours(in), c.k8s(in); !sameMessages(got, want) {
					t.Fatalf("%s(%q) = %q, want %q", c.name, in, got, want)
				}
			})
		})
	}
}

// sameMessages compares two answers, nil (valid) included: callers test
// the result against nil.
func sameMessages(a, b []string) bool {
	return (a == nil) == (b == nil) && slices.Equal(a, b)
}

func BenchmarkValidateName(b *testing.B) {
	for _, name := range []string{"webapp", strings.Repeat("a", 63), "Not_A.Name"} {
		b.Run(name[:min(len(name), 10)], func(b *testing.B) {
			for b.Loop() {
				ValidateName(name)
			}
		})
	}
}
