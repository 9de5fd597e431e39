package cli

import (
	"fmt"
	"strings"
)

// diffContext is the number of unchanged lines around each change.
const diffContext = 3

// edit is one line of an edit script: kept (' '), removed ('-') or added
// ('+').
type edit struct {
	op   byte
	line string
}

// diffLines returns the shortest edit script from a to b, computed from
// their longest common subsequence. It is quadratic in the number of
// lines, which is fine for one object's YAML.
func diffLines(a, b []string) []edit {
	n, m := len(a), len(b)
	// lcs[i][j] is the length of the longest common subsequence of a[i:]
	// and b[j:].
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var script []edit
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case a[i] == b[j]:
			script = append(script, edit{' ', a[i]})
			i++
			j++
		case lcs[i+1][j] >= lcs[i][j+1]:
			script = append(script, edit{'-', a[i]})
			i++
		default:
			script = append(script, edit{'+', b[j]})
			j++
		}
	}
	for ; i < n; i++ {
		script = append(script, edit{'-', a[i]})
	}
	for ; j < m; j++ {
		script = append(script, edit{'+', b[j]})
	}
	return script
}

// writeUnified writes the unified diff of a and b, with diffContext lines
// of context, under the names from and to. It writes nothing when they
// are equal.
func writeUnified(b *strings.Builder, from, to string, a, c []string) {
	script := diffLines(a, c)
	// before[k] counts the lines of a and of c that precede script[k].
	type pos struct{ a, c int }
	before := make([]pos, len(script)+1)
	for k, e := range script {
		before[k+1] = before[k]
		if e.op != '+' {
			before[k+1].a++
		}
		if e.op != '-' {
			before[k+1].c++
		}
	}
	header := false
	for k := 0; k < len(script); {
		for k < len(script) && script[k].op == ' ' {
			k++
		}
		if k == len(script) {
			break
		}
		start := max(0, k-diffContext)
		end := k
		for {
			for end < len(script) && script[end].op != ' ' {
				end++
			}
			next := end
			for next < len(script) && script[next].op == ' ' {
				next++
			}
			// Changes closer than twice the context share a hunk.
			if next < len(script) && next-end <= 2*diffContext {
				end = next
				continue
			}
			end = min(len(script), end+diffContext)
			break
		}
		if !header {
			fmt.Fprintf(b, "--- %s\n+++ %s\n", from, to)
			header = true
		}
		fmt.Fprintf(b, "@@ -%s +%s @@\n",
			hunkRange(before[start].a, before[end].a-before[start].a),
			hunkRange(before[start].c, before[end].c-before[start].c))
		for _, e := range script[start:end] {
			b.WriteByte(e.op)
			b.WriteString(e.line)
			b.WriteByte('\n')
		}
		k = end
	}
}

// hunkRange writes a hunk's line range as unified diffs do: the first
// line (1-based) and the count, or for an empty range the line before it.
func hunkRange(before, count int) string {
	if count == 0 {
		return fmt.Sprintf("%d,0", before)
	}
	if count == 1 {
		return fmt.Sprintf("%d", before+1)
	}
	return fmt.Sprintf("%d,%d", before+1, count)
}
