package replay

import (
	"bytes"
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
		"<!doctype html>", "<style>", `<td class="name">111122223333</td>`, "<td>500</td>", // 2 × 250 throttled
		"&lt;script&gt;.amazonaws.com: 120", "bad &amp; worse.json: not a CloudTrail log",
		`account: &#34;111122223333&#34;, region: us-east-1, category: cluster-read, capacity: 300, refill_per_second: 5}`,
		"<svg", "calls throttled per second (without retries)", "seconds from 2026-11-30 12:00:00 UTC",
		">111122223333</text>", ">444455556666</text>", // the legend: what tells the buckets apart
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

// The legend names a bucket by its account, and by what else tells it
// from the other buckets shown.
func TestTimelineLabels(t *testing.T) {
	tl := &Timeline{Buckets: []TimelineBucket{
		{Account: "1", Region: "us-east-1", Service: "ecs", Category: "read"},
		{Account: "1", Region: "eu-west-1", Service: "ecs", Category: "write"},
		{Account: "2", Region: "us-east-1", Service: "cloudmap", Category: "read"},
	}}
	want := []string{"1 us-east-1 ecs/read", "1 eu-west-1 ecs/write", "2 us-east-1 cloudmap/read"}
	for i, w := range want {
		if got := tl.label(i); got != w {
			t.Errorf("label %d = %q, want %q", i, got, w)
		}
	}
	tl.Buckets = tl.Buckets[:1]
	if got := tl.label(0); got != "1" {
		t.Errorf("one bucket: %q, want its account", got)
	}
}
