package liveview

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestServiceRevisions: two revisions' instance counts over ticks come
// back as a series each, by name, with the newest sample's percent and
// tags; a tick without a revision reads 0.
func TestServiceRevisions(t *testing.T) {
	var state []ServiceSample
	r := New(Options{History: 8, Services: func() []ServiceSample { return state }})
	one := func(n, pct int, tags ...string) RevisionSample {
		return RevisionSample{Name: "hello-00001", Percent: pct, Tags: tags, Instances: n}
	}
	two := func(n, pct int, tags ...string) RevisionSample {
		return RevisionSample{Name: "hello-00002", Percent: pct, Tags: tags, Instances: n}
	}
	steps := [][]RevisionSample{
		{one(2, 100)},
		{one(2, 100), two(1, 0, "canary")},
		{one(3, 90), two(1, 10, "canary")},
		{one(2, 50), two(2, 50, "canary")},
		{two(3, 100, "canary", "stable")},
	}
	for i, revs := range steps {
		state = []ServiceSample{{Name: "hello", Instances: map[string]int{"ready": 1}, Revisions: revs}}
		r.Tick(sec(i + 1))
	}
	got := r.Services(time.Time{})
	if len(got.Services) != 1 || len(got.Services[0].Revisions) != 2 {
		t.Fatalf("services %+v, want hello with two revisions", got.Services)
	}
	revs := got.Services[0].Revisions
	if r := revs[0]; r.Name != "hello-00001" || !slices.Equal(r.Instances, []int{2, 2, 3, 2, 0}) || r.Percent != 50 || len(r.Tags) != 0 {
		t.Errorf("first revision %+v, want hello-00001 [2 2 3 2 0] at its last 50 %%", r)
	}
	if r := revs[1]; r.Name != "hello-00002" || !slices.Equal(r.Instances, []int{0, 1, 1, 2, 3}) || r.Percent != 100 || !slices.Equal(r.Tags, []string{"canary", "stable"}) {
		t.Errorf("second revision %+v, want hello-00002 [0 1 1 2 3] at 100 %% canary stable", r)
	}
	// The state series are still there.
	if want := []int{1, 1, 1, 1, 1}; !slices.Equal(got.Services[0].Instances["ready"], want) {
		t.Errorf("ready %v, want %v", got.Services[0].Instances["ready"], want)
	}
	// A later window starts after the first point.
	if late := r.Services(sec(3)); len(late.Services[0].Revisions[0].Instances) != 2 {
		t.Errorf("since the third tick: %+v, want two points", late.Services[0].Revisions)
	}
}

// TestServiceRevisionsBounded: a sample with more than MaxRevisions keeps
// its last ones, and a history over more than MaxRevisions keeps those
// seen last, without changing the caller's samples.
func TestServiceRevisionsBounded(t *testing.T) {
	var state []ServiceSample
	r := New(Options{History: 4, Services: func() []ServiceSample { return state }})
	name := func(i int) string { return fmt.Sprintf("hello-%05d", i) }
	revs := func(from, to int) []RevisionSample {
		var out []RevisionSample
		for i := from; i <= to; i++ {
			out = append(out, RevisionSample{Name: name(i), Instances: 1})
		}
		return out
	}
	state = []ServiceSample{{Name: "hello", Revisions: revs(1, 12)}}
	given := state[0].Revisions
	r.Tick(sec(1))
	if len(state[0].Revisions) != 12 || &state[0].Revisions[0] != &given[0] {
		t.Errorf("the recorder changed the caller's sample")
	}
	got := r.Services(time.Time{}).Services[0].Revisions
	if len(got) != MaxRevisions || got[0].Name != name(3) || got[MaxRevisions-1].Name != name(12) {
		t.Errorf("one sample of 12 revisions kept %d, from %s, want the last %d", len(got), got[0].Name, MaxRevisions)
	}
	state = []ServiceSample{{Name: "hello", Revisions: revs(13, 17)}}
	r.Tick(sec(2))
	got = r.Services(time.Time{}).Services[0].Revisions
	var names []string
	for _, h := range got {
		names = append(names, h.Name)
	}
	want := []string{name(8), name(9), name(10), name(11), name(12), name(13), name(14), name(15), name(16), name(17)}
	if !slices.Equal(names, want) {
		t.Errorf("history keeps %v, want the %d seen last %v", names, MaxRevisions, want)
	}
}
