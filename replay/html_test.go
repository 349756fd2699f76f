package replay

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/replay/ctgen"
)

// The HTML page holds the table, the overrides and what was not played,
// escaped, and loads nothing.
func TestWriteHTML(t *testing.T) {
	s := acceptance
	s.Duration = 2 * time.Minute
	s.Tenants = append(s.Tenants, ctgen.Tenant{Account: "111122223333", Source: "<script>.amazonaws.com", Action: "X", Rate: 1})
	log := append(gen(t, s), []byte("\n")...)
	r, err := Run([]Input{input("a.json", log), input("bad & worse.json", []byte("nope"))}, Options{Groups: noRetries()})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := r.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		"<!doctype html>", "<style>", `<td class="name acct">111122223333</td>`, "<td>500</td>", // 2 × 250 throttled
		"&lt;script&gt;.amazonaws.com: 120", "bad &amp; worse.json: not a CloudTrail log",
		`account: &#34;111122223333&#34;, region: us-east-1, category: cluster-read, capacity: 300, refill_per_second: 5}`,
		"<svg", "UTC, 2026-11-30; a point per second", ">12:00:00</text>", ">12:01:00</text>", // a clock-time axis
		">111122223333 us-east-1 ecs/cluster-read</text>", ">444455556666 us-east-1 ecs/cluster-read</text>", // a chart a bucket
		">quota: 20 per second</text>", ">throttled</text>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	// The figures' only addresses are SVG's namespaces, which load nothing.
	bare := strings.NewReplacer(`xmlns="http://www.w3.org/2000/svg"`, "", `xmlns:xlink="http://www.w3.org/1999/xlink"`, "").Replace(page)
	for _, bad := range []string{"<script>", "src=", "http://", "https://", "<link"} {
		if strings.Contains(bare, bad) {
			t.Errorf("the page holds %q", bad)
		}
	}
}

// The timeline follows the most throttled buckets, second by second over
// ten minutes: the bucket arithmetic's throttles, bin by bin.
func TestTimelineGivesTheBucketArithmetic(t *testing.T) {
	r, err := Run([]Input{input("a.json", gen(t, acceptance))}, Options{Groups: noRetries()})
	if err != nil {
		t.Fatal(err)
	}
	tl := r.Timeline
	if tl == nil || tl.Step != time.Second || !tl.Start.Equal(t0) || len(tl.Buckets) != 2 {
		t.Fatalf("timeline %+v", tl)
	}
	steady, burst := tl.Buckets[0], tl.Buckets[1] // 2,970 throttled, then 2,500
	if burst.Account != "111122223333" || steady.Account != "444455556666" || len(burst.Calls) != 600 {
		t.Fatalf("buckets %s, %s, %d bins", burst.Account, steady.Account, len(burst.Calls))
	}
	for s := range 600 {
		wantBurst, wantSteady := int64(0), int64(0)
		if s%60 == 0 {
			wantBurst = 250
		}
		if s >= 6 {
			wantSteady = 5
		}
		if burst.Throttled[s] != wantBurst || steady.Throttled[s] != wantSteady || steady.Calls[s] != 25 {
			t.Fatalf("second %d: throttled %d and %d, calls %d; want %d, %d, 25", s, burst.Throttled[s], steady.Throttled[s], steady.Calls[s], wantBurst, wantSteady)
		}
	}
	if got := binStep(7 * 24 * time.Hour); got != 15*time.Minute {
		t.Errorf("a week's bins: %v, want 15m", got)
	}
	if got := binStep(3 * 365 * 24 * time.Hour); got%(24*time.Hour) != 0 || (3*365*24*time.Hour)/got >= maxBins {
		t.Errorf("three years' bins: %v", got)
	}
}

// The figure draws a chart per bucket, titled with its whole name, whose
// legend reads calls, throttled and its quota (the refill rate's calls
// per bin), on a clock-time axis.
func TestTimelineFigure(t *testing.T) {
	tl := &Timeline{Start: t0, Step: time.Minute, Buckets: []TimelineBucket{
		{Account: "111122223333", Region: "us-east-1", Service: "ecs", Category: "cluster-resource-read", Rate: 20, Calls: []int64{1, 2}, Throttled: []int64{0, 1}},
		{Account: "111122223333", Region: "us-east-1", Service: "ecs", Category: "cluster-resource-modify", Rate: 1, Calls: []int64{3, 4}, Throttled: []int64{1, 0}},
	}}
	fig := timelineFigure(tl)
	if len(fig.Panels) != 2 || !fig.Start.Equal(t0) || fig.Step != time.Minute {
		t.Fatalf("%d panels from %v by %v", len(fig.Panels), fig.Start, fig.Step)
	}
	for i, p := range fig.Panels {
		b := tl.Buckets[i]
		if p.Title != "111122223333 us-east-1 ecs/"+b.Category || len(p.Lines) != 2 || p.Lines[0].Name != "calls" || p.Lines[1].Name != "throttled" {
			t.Errorf("panel %d: %q %+v", i, p.Title, p.Lines)
		}
		if p.Level != b.Rate*60 || p.LevelLabel != fmt.Sprintf("quota: %g per minute", b.Rate*60) {
			t.Errorf("panel %d: quota %v %q", i, p.Level, p.LevelLabel)
		}
	}
}
