package traffic

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// Check refuses a block for the entry at fault (its index), or for the
// block as a whole (-1), and takes every valid one.
func TestCheckTraffic(t *testing.T) {
	latest := func(pct int, tag string) Target {
		return Target{LatestRevision: true, Percent: pct, Tag: tag}
	}
	rev := func(name string, pct int, tag string) Target {
		return Target{RevisionName: name, Percent: pct, Tag: tag}
	}
	for _, c := range []struct {
		name    string
		traffic []Target
		entry   int // -2: valid
	}{
		{"empty", nil, -2},
		{"all latest", []Target{latest(100, "")}, -2},
		{"split with a tag-only entry", []Target{rev("s-00001", 90, "stable"), latest(10, ""), rev("s-00002", 0, "canary")}, -2},
		{"sum 99", []Target{rev("s-00001", 90, ""), latest(9, "")}, -1},
		{"sum 110", []Target{rev("s-00001", 100, ""), latest(10, "")}, -1},
		{"duplicate tag", []Target{rev("s-00001", 50, "a"), latest(50, "a")}, 1},
		{"bad tag", []Target{latest(100, "Canary")}, 0},
		{"tag with --", []Target{latest(100, "a--b")}, 0},
		{"both revision and latest", []Target{{RevisionName: "s-00001", LatestRevision: true, Percent: 100}}, 0},
		{"neither", []Target{{Percent: 100}}, 0},
		{"percent 0 untagged", []Target{latest(100, ""), rev("s-00001", 0, "")}, 1},
		{"negative", []Target{latest(100, ""), rev("s-00001", -10, "x"), rev("s-00001", 10, "")}, 1},
		{"another service's revision", []Target{rev("t-00001", 100, "")}, 0},
	} {
		err := Check("s", c.traffic)
		var te *Error
		switch {
		case c.entry == -2 && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.entry != -2 && (!errors.As(err, &te) || te.Entry != c.entry):
			t.Errorf("%s: %v, want an error at entry %d", c.name, err, c.entry)
		}
	}
	var many []Target
	for i := range MaxRevisions + 1 {
		many = append(many, rev(fmt.Sprintf("s-%05d", i+1), 0, "t"+strconv.Itoa(i)))
	}
	many[0].Percent = 100
	if err := Check("s", many); err == nil {
		t.Errorf("%d revisions accepted", len(many))
	}
	// 10,000 tags on one revision: refused whole, before any is looked at.
	tags := []Target{latest(100, "")}
	for i := range 10_000 {
		tags = append(tags, rev("s-00001", 0, "t"+strconv.Itoa(i)))
	}
	var te *Error
	if err := Check("s", tags); !errors.As(err, &te) || te.Entry != -1 || !strings.Contains(te.Msg, "at most 100") {
		t.Errorf("10,001 entries: %v; want refused as a whole, at most %d", err, MaxEntries)
	}
	if err := Check("s", tags[:MaxEntries]); err != nil {
		t.Errorf("%d entries: %v", MaxEntries, err)
	}
}
