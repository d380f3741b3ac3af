// Package suggest finds the known name closest to a mistyped one, for the
// "did you mean …?" of an error message.
package suggest

import "slices"

// Closest returns the candidate closest to name by edit distance, or ""
// when none is close: at most half of name's length, plus one, apart.
func Closest(name string, candidates []string) string {
	if near := Nearest(name, candidates, 1); len(near) == 1 {
		return near[0]
	}
	return ""
}

// Nearest returns at most n candidates close to name (as [Closest] judges
// it), the closest first, ties in the candidates' order.
func Nearest(name string, candidates []string, n int) []string {
	type near struct {
		name string
		d    int
	}
	var close []near
	for _, c := range candidates {
		if d := distance(name, c); d < len(name)/2+2 {
			close = append(close, near{c, d})
		}
	}
	slices.SortStableFunc(close, func(a, b near) int { return a.d - b.d })
	var out []string
	for _, c := range close[:min(n, len(close))] {
		out = append(out, c.name)
	}
	return out
}

// distance is the Levenshtein distance between a and b, in bytes.
func distance(a, b string) int {
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
