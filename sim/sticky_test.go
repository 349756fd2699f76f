package sim

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/autoscale"
)

// Forty sticky client groups over a 90/10 split (the latest listed
// first) changed to 50/50 at 5 s, which moves once the new revision has
// the instances its share needs (the traffic log's "traffic moved"): a
// group whose key is on the new revision at 10 % stays there, one whose
// point the boundary crossed moves to it at that instant, the others
// stay on the old one; each as autoscale.Split.PickKey gives it over the
// revisions oldest first, the pool's arithmetic. The summary lists each
// group's revisions.
func TestStickyGroupsStayThenMoveTowardGrowing(t *testing.T) {
	sc := splitScenario([]TrafficTarget{{LatestRevision: true, Percent: 10}, {Revision: "hello-00001", Percent: 90}})
	sc.Backend.TrafficChanges = []TrafficChange{{At: 5 * time.Second,
		Traffic: []TrafficTarget{{LatestRevision: true, Percent: 50}, {Revision: "hello-00001", Percent: 50}}}}
	for i := range 40 {
		sc.Clients = append(sc.Clients, Clients{Name: fmt.Sprintf("user-%d", i), Rate: 2, StickyKey: fmt.Sprintf("user-%d", i)})
	}
	res, err := Run(sc)
	if err != nil {
		t.Fatal(err)
	}
	var movedAt time.Duration
	for _, e := range res.TrafficLog {
		if strings.HasPrefix(e.Msg, "traffic moved 10 → 50 %") {
			movedAt = e.At
		}
	}
	if movedAt < 5*time.Second || movedAt >= 10*time.Second {
		t.Fatalf("the split moved at %v, want in [5s, 10s): %+v", movedAt, res.TrafficLog)
	}
	// Each group calls twice a second, the users 100 times: this many of
	// each before the move.
	groupBefore, usersBefore := int(2*movedAt/time.Second), int(100*movedAt/time.Second)
	before, after := mustNewSplit(t, 90, 10), mustNewSplit(t, 50, 50)
	kinds := map[string]int{}
	for i, g := range res.Groups[1:] {
		key := sc.Clients[i+1].StickyKey
		old, cur := g.Revisions["hello-00001"], g.Revisions["hello-00002"]
		switch b, a := before.PickKey(key), after.PickKey(key); {
		case b == 1: // on the new revision from the start: never back
			kinds["new"]++
			if old != 0 || cur != 20 {
				t.Errorf("%s (point %d): %v, want all 20 calls on hello-00002", key, autoscale.StickyPoint(key), g.Revisions)
			}
		case a == 1: // crossed by the boundary at 5 s: once, toward the new one
			kinds["moved"]++
			if old != groupBefore || cur != 20-groupBefore {
				t.Errorf("%s (point %d): %v, want %d calls on hello-00001 until %v then the rest on hello-00002", key, autoscale.StickyPoint(key), g.Revisions, groupBefore, movedAt)
			}
		default:
			kinds["old"]++
			if old != 20 || cur != 0 {
				t.Errorf("%s (point %d): %v, want all 20 calls on hello-00001", key, autoscale.StickyPoint(key), g.Revisions)
			}
		}
	}
	if kinds["new"] == 0 || kinds["moved"] == 0 || kinds["old"] == 0 {
		t.Fatalf("the 40 keys do not cover the three cases: %v", kinds)
	}
	// The per-request users still split exactly 90/10, then 50/50.
	wantOld, wantNew := usersBefore*9/10+(1000-usersBefore)/2, usersBefore/10+(1000-usersBefore)/2
	if g := res.Groups[0]; g.Revisions["hello-00001"] != wantOld || g.Revisions["hello-00002"] != wantNew {
		t.Errorf("users (per request): %v, want %d/%d", g.Revisions, wantOld, wantNew)
	}
	var sum bytes.Buffer
	if err := WriteSummary(&sum, []*Result{res}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sum.String(), "sticky clients") || !strings.Contains(sum.String(), fmt.Sprintf("hello-00001 %d, hello-00002 %d", groupBefore, 20-groupBefore)) {
		t.Errorf("summary lacks the sticky table:\n%s", sum.String())
	}
}

func mustNewSplit(t *testing.T, percents ...int) autoscale.Split {
	t.Helper()
	s, err := autoscale.NewSplit(percents)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A group with both a sticky key and a tag is refused at its place, and
// a scenario file's sticky_key reaches the group.
func TestStickyKeyInScenarioFile(t *testing.T) {
	head := "backend:\n  revisions:\n    - at: 0s\n    - at: 0s\n  traffic:\n    - {revision: hello-00001, percent: 50}\n    - {latest_revision: true, percent: 50, tag: canary}\n"
	_, err := ParseStudy("t.yaml", []byte(head+"clients:\n  - {rate: 1, tag: canary, sticky_key: alice}\n"))
	if want := "t.yaml:9:40: clients[0].sticky_key: give sticky_key or tag, not both"; !errors.Is(err, ErrInvalidScenario) || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %v\n want %s…", err, want)
	}
	st, err := ParseStudy("t.yaml", []byte(head+"clients:\n  - {rate: 1, sticky_key: alice}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Runs[0].Clients[0].StickyKey; got != "alice" {
		t.Fatalf("sticky_key %q, want alice", got)
	}
}
