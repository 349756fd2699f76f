package replay

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/replay/accessgen"
	"github.com/tollgate/tollgate/sim"
)

// A run's bins widen as it grows, never past maxBins, keeping each bin's
// most (instances) and sum (429s) exact.
func TestBinsWidenAsTheRunGrows(t *testing.T) {
	m := newMinuteSeries()
	const days = 9
	var total, peak int
	for sec := range days * 86400 {
		n, rej := sec%7, sec%3
		if sec == 5*86400+17 {
			n = 99
		}
		total += rej
		peak = max(peak, n)
		m.add(sim.Second{Start: time.Duration(sec) * time.Second, Ready: n, Rejected: rej})
	}
	tl := scaleTimeline([]*minuteSeries{m})
	// 777,600 s in at most 720 bins: 30 minutes (432 bins).
	if tl.Step != 30*time.Minute || len(tl.Instances[0]) != 432 || len(tl.Rejected[0]) != 432 {
		t.Fatalf("%d days: step %v, %d bins", days, tl.Step, len(tl.Instances[0]))
	}
	var sum, most int
	for i := range tl.Rejected[0] {
		sum += tl.Rejected[0][i]
		most = max(most, tl.Instances[0][i])
	}
	if sum != total || most != peak || tl.Instances[0][240] != 99 || tl.Instances[0][239] != 6 {
		t.Errorf("429s %d (want %d), peak %d (want %d), days %v", sum, total, most, peak, tl.Instances[0])
	}

	// Two runs that ended at different widths share the wider one.
	short := newMinuteSeries()
	for sec := range 100 {
		short.add(sim.Second{Start: time.Duration(sec) * time.Second, Rejected: 1})
	}
	long := newMinuteSeries()
	for sec := range 1000 {
		long.add(sim.Second{Start: time.Duration(sec) * time.Second, Rejected: 1})
	}
	tl = scaleTimeline([]*minuteSeries{short, long})
	if tl.Step != 2*time.Second || len(tl.Rejected[0]) != 50 || tl.Rejected[0][0] != 2 || len(tl.Rejected[1]) != 500 {
		t.Errorf("step %v, bins %d and %d, first %d", tl.Step, len(tl.Rejected[0]), len(tl.Rejected[1]), tl.Rejected[0][0])
	}
}

// The autoscaling page holds the table, a column per value, and a figure
// of three panels with a line per value; it loads nothing.
func TestScaleWriteHTML(t *testing.T) {
	log := genLog(t, accessgen.Spec{Format: "combined", Start: noon, Path: "/hello/x", Phases: stepSpec, Service: []time.Duration{300 * time.Millisecond}})
	rep, err := RunScale([]Input{memInput("a.log", log)}, ScaleOptions{
		Services: []ScaleService{{Name: "hello<1>", Backend: stepScale}},
		Service:  "hello<1>",
		Sweep:    Sweep{Setting: "max_instances", Values: []int{2, 6, 40}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := rep.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"<!doctype html>", "<style>", "Service hello&lt;1&gt;", "<th>max_instances=40</th>", "<svg",
		"hello&lt;1&gt;: instances (at the end of each second)", "pending requests", "429s at max instances, per second",
		"seconds from 2026-11-30 1", "max_instances=6"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if n := strings.Count(page, "<svg"); n != 1 {
		t.Errorf("%d figures, want 1", n)
	}
	for _, bad := range []string{"<script", "src=", "<link", "hello<1>"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page holds %q", bad)
		}
	}
}
