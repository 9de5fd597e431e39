package loader

import "strings"

// suggest returns the candidate closest to name when it is close enough to
// be a likely typo, or "". A candidate that differs only in case, '_' or
// '-' always qualifies (cpuMilli, cpu-milli for cpu_milli); otherwise the
// edit distance may be at most a third of the shorter word, and at least 1.
func suggest(name string, candidates []string) string {
	folded := foldName(name)
	for _, c := range candidates {
		if foldName(c) == folded {
			return c
		}
	}
	best, bestDist := "", -1
	for _, c := range candidates {
		limit := max(1, min(len(name), len(c))/3)
		d := editDistance(strings.ToLower(name), strings.ToLower(c))
		if d <= limit && (bestDist < 0 || d < bestDist) {
			best, bestDist = c, d
		}
	}
	return best
}

// foldName lowers s and drops '_' and '-'.
func foldName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' {
			return -1
		}
		return toLowerASCII(r)
	}, s)
}

func toLowerASCII(r rune) rune {
	if 'A' <= r && r <= 'Z' {
		return r + 'a' - 'A'
	}
	return r
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
