package cli

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestAge(t *testing.T) {
	tests := []struct {
		name string
		at   time.Time
		want string
	}{
		{name: "unknown", want: "<unknown>"},
		{name: "future", at: now.Add(time.Minute), want: "0s"},
		{name: "seconds", at: ago(4 * time.Second), want: "4s"},
		{name: "minutes", at: ago(3*time.Minute + 59*time.Second), want: "3m"},
		{name: "hours", at: ago(47 * time.Hour), want: "47h"},
		{name: "days", at: ago(5 * 24 * time.Hour), want: "5d"},
		{name: "years", at: ago(800 * 24 * time.Hour), want: "2y"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := age(tc.at); got != tc.want {
				t.Errorf("age(%v) = %q, want %q", tc.at, got, tc.want)
			}
		})
	}
}

func TestQuantities(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{name: "cpu_cores", got: cpu(2000), want: "2"},
		{name: "cpu_milli", got: cpu(250), want: "250m"},
		{name: "bytes", got: bytesIEC(512), want: "512B"},
		{name: "kib_fraction", got: bytesIEC(1536), want: "1.5KiB"},
		{name: "gib_exact", got: bytesIEC(4 << 30), want: "4GiB"},
		{name: "mib_rounded", got: bytesIEC(432_013_312), want: "412MiB"},
		{name: "cpu_time_ms", got: cpuTime(1500), want: "2ms"},
		{name: "cpu_time_s", got: cpuTime(1_234_567), want: "1.2s"},
		{name: "cpu_time_hours", got: cpuTime(3_700_000_000), want: "1h1m40s"},
		{name: "short_scope", got: shortScope("marshal-coder-"+agentID+".scope", agentID), want: "marshal-coder-3f9a0c1e….scope"},
		{name: "seen_once", got: seen(1, ago(time.Hour), ago(time.Minute)), want: "1m"},
		{name: "seen_repeated", got: seen(3, ago(time.Hour), ago(time.Minute)), want: "1m (x3 over 1h)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %q, want %q", tc.got, tc.want)
			}
		})
	}
}

func TestTableAlignsByRunes(t *testing.T) {
	tb := newTable("A", "B", "C")
	var b strings.Builder
	tb.write(&b, "", [][]string{{"x…y", "1", ""}, {"long-cell", "22", "last"}})
	want := "A           B    C\nx…y         1\nlong-cell   22   last\n"
	if b.String() != want {
		t.Errorf("table =\n%s\nwant\n%s", b.String(), want)
	}
}

func TestUnifiedDiff(t *testing.T) {
	ten := strings.Split("a b c d e f g h i j", " ")
	tests := []struct {
		name string
		a, b []string
		want string
	}{
		{name: "equal", a: ten, b: ten, want: ""},
		{name: "both_empty", want: ""},
		{name: "all_added", b: []string{"x", "y"}, want: "--- A\n+++ B\n@@ -0,0 +1,2 @@\n+x\n+y\n"},
		{name: "all_removed", a: []string{"x"}, want: "--- A\n+++ B\n@@ -1 +0,0 @@\n-x\n"},
		{
			name: "one_change_with_context",
			a:    ten, b: replace(ten, 4, "E"),
			want: "--- A\n+++ B\n@@ -2,7 +2,7 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n",
		},
		{
			name: "far_changes_are_two_hunks",
			a:    ten, b: replace(replace(ten, 0, "A"), 9, "J"),
			want: "--- A\n+++ B\n@@ -1,4 +1,4 @@\n-a\n+A\n b\n c\n d\n@@ -7,4 +7,4 @@\n g\n h\n i\n-j\n+J\n",
		},
		{
			name: "near_changes_share_a_hunk",
			a:    ten, b: replace(replace(ten, 1, "B"), 7, "H"),
			want: "--- A\n+++ B\n@@ -1,10 +1,10 @@\n a\n-b\n+B\n c\n d\n e\n f\n g\n-h\n+H\n i\n j\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			writeUnified(&b, "A", "B", tc.a, tc.b)
			if b.String() != tc.want {
				t.Errorf("writeUnified(%q, %q) =\n%s\nwant\n%s", tc.a, tc.b, b.String(), tc.want)
			}
		})
	}
}

func replace(s []string, i int, v string) []string {
	s = slices.Clone(s)
	s[i] = v
	return s
}

var hunkHeader = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@$`)

// patch applies a unified diff to a, checking every context and removed
// line against a, and returns the result.
func patch(t *rapid.T, a []string, diff string) []string {
	var out []string
	next := 0 // the next line of a not yet copied
	lines := strings.Split(strings.TrimSuffix(diff, "\n"), "\n")
	if diff == "" {
		return slices.Clone(a)
	}
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "--- ") || !strings.HasPrefix(lines[1], "+++ ") {
		t.Fatalf("no header in\n%s", diff)
	}
	for i := 2; i < len(lines); {
		m := hunkHeader.FindStringSubmatch(lines[i])
		if m == nil {
			t.Fatalf("line %d: %q is not a hunk header", i, lines[i])
		}
		start, _ := strconv.Atoi(m[1])
		count := 1
		if m[2] != "" {
			count, _ = strconv.Atoi(m[2])
		}
		first := start - 1 // 0-based first line of the hunk in a
		if count == 0 {
			first = start
		}
		if first < next {
			t.Fatalf("hunk %q overlaps the one before", lines[i])
		}
		out = append(out, a[next:first]...)
		next = first
		seenA := 0
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "@@"); i++ {
			op, text := lines[i][0], lines[i][1:]
			switch op {
			case ' ', '-':
				if next >= len(a) || a[next] != text {
					t.Fatalf("hunk line %q does not match a[%d]", lines[i], next)
				}
				if op == ' ' {
					out = append(out, text)
				}
				next++
				seenA++
			case '+':
				out = append(out, text)
			default:
				t.Fatalf("bad hunk line %q", lines[i])
			}
		}
		if seenA != count {
			t.Fatalf("hunk covers %d lines of a, header says %d", seenA, count)
		}
	}
	return append(out, a[next:]...)
}

// TestUnifiedDiffPatchesBack checks, for random texts, that applying the
// diff of a and b to a gives b, and that equal texts give no diff.
func TestUnifiedDiffPatchesBack(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		line := rapid.SampledFrom([]string{"a", "b", "c", "d", "  x: 1", "  x: 2", ""})
		a := rapid.SliceOfN(line, 0, 30).Draw(t, "a")
		b := rapid.SliceOfN(line, 0, 30).Draw(t, "b")
		var d strings.Builder
		writeUnified(&d, "a", "b", a, b)
		if slices.Equal(a, b) != (d.Len() == 0) {
			t.Fatalf("equal %v but diff %q", slices.Equal(a, b), d.String())
		}
		if got := patch(t, a, d.String()); !slices.Equal(got, b) {
			t.Fatalf("patch(a, diff) = %q, want %q\n%s", got, b, d.String())
		}
	})
}
