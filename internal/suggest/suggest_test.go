package suggest

import (
	"strings"
	"testing"
)

func TestClosest(t *testing.T) {
	actions := []string{"DescribeClusters", "ListClusters", "CreateCluster", "DescribeServices", "RunTask"}
	for _, tc := range []struct {
		name, want string
		ok         bool
	}{
		{"DescribeCluster", "DescribeClusters", true},  // a letter missing
		{"describeclusters", "DescribeClusters", true}, // case
		{"DescirbeClusters", "DescribeClusters", true}, // two letters swapped
		{"ListCluster", "ListClusters", true},
		{"RunTsk", "RunTask", true},
		{"RunTask", "", false},          // defined: nothing to suggest
		{"DeleteEverything", "", false}, // nothing near
		{"", "", false},
		{strings.Repeat("x", 65), "", false},
	} {
		got, ok := Closest(tc.name, actions)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Closest(%q) = %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	// Short names allow one edit only, the shortest none but case.
	if got, ok := Closest("abd", []string{"xyz", "abc"}); !ok || got != "abc" {
		t.Errorf("Closest(abd) = %q, %v", got, ok)
	}
	if _, ok := Closest("abd", []string{"xyd"}); ok {
		t.Error("abd is not a typo of xyd")
	}
	if _, ok := Closest("b", []string{"a"}); ok {
		t.Error("b is not a typo of a")
	}
	if got, ok := Closest("A", []string{"a"}); !ok || got != "a" {
		t.Errorf("Closest(A) = %q, %v", got, ok)
	}
}

func TestDidYouMean(t *testing.T) {
	if got := DidYouMean("cluster-reed", []string{"cluster-read", "cluster-modify"}); got != ` (did you mean "cluster-read"?)` {
		t.Errorf("got %q", got)
	}
	if got := DidYouMean("zzz", []string{"cluster-read"}); got != "" {
		t.Errorf("got %q", got)
	}
}

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"ab", "ba", 1}, {"ca", "abc", 3}, {"héllo", "hello", 1}} {
		if got := distance(tc.a, tc.b); got != tc.d {
			t.Errorf("distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}

func FuzzClosest(f *testing.F) {
	f.Add("DescribeCluster", "DescribeClusters")
	f.Add("", "x")
	f.Fuzz(func(t *testing.T, name, cand string) {
		got, ok := Closest(name, []string{cand, "fixed"})
		if ok && got != cand && got != "fixed" {
			t.Fatalf("suggested %q, not a candidate", got)
		}
		if d := distance(name, cand); d < 0 || d > max(len([]rune(name)), len([]rune(cand))) {
			t.Fatalf("distance %d out of range", d)
		}
	})
}
