// Package suggest finds, for a name nobody defined, the defined name it
// was most likely meant to be: the "did you mean" of an error message.
package suggest

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxLen bounds the names compared: longer ones get no suggestion, so a
// hostile input costs at most maxLen² steps per candidate.
const maxLen = 64

// Closest returns the candidate nearest to name by edit distance (one
// insertion, deletion, substitution or swap of neighbours is one edit;
// case is ignored), when it is near enough to be a typo: none but case for
// names of one or two characters, one edit up to four, two up to eight,
// three beyond. Ties
// go to the first candidate. It returns false when none is near enough,
// or when name is itself a candidate.
func Closest(name string, candidates []string) (string, bool) {
	if name == "" || len(name) > maxLen {
		return "", false
	}
	n := utf8.RuneCountInString(name)
	limit := 0 // one or two characters: only a difference of case
	switch {
	case n > 8:
		limit = 3
	case n > 4:
		limit = 2
	case n > 2:
		limit = 1
	}
	lower := strings.ToLower(name)
	best, bestD := "", limit+1
	for _, c := range candidates {
		if c == name {
			return "", false
		}
		if len(c) > maxLen {
			continue
		}
		if d := distance(lower, strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best, bestD <= limit
}

// DidYouMean returns ` (did you mean "x"?)` for the candidate Closest
// finds, or "".
func DidYouMean(name string, candidates []string) string {
	if c, ok := Closest(name, candidates); ok {
		return " (did you mean " + strconv.Quote(c) + "?)"
	}
	return ""
}

// distance is the optimal string alignment distance between a and b, in
// runes: Levenshtein's edits plus the swap of two neighbours.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// Three rows: the one before the previous (for swaps), the previous,
	// and the current.
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
