package replay

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/sim"
)

// TestWhoPointsAtTheBurst: a Terraform burst of 120 DescribeClusters in
// one second from one role, beside a steady dashboard: the throttled
// bucket names the role, Terraform's user agent and address first by
// throttles, in JSON, text and HTML; the bucket nobody throttled has
// none.
func TestWhoPointsAtTheBurst(t *testing.T) {
	var lines []string
	rec := func(sec int, action, arn, ua, ip string) {
		lines = append(lines, fmt.Sprintf(`{"eventTime":"2026-11-30T12:%02d:%02dZ","eventSource":"ecs.amazonaws.com","eventName":%q,"awsRegion":"us-east-1","userIdentity":{"type":"AssumedRole","arn":%q,"accountId":"111122223333"},"userAgent":%q,"sourceIPAddress":%q}`,
			sec/60, sec%60, action, arn, ua, ip))
	}
	for range 120 {
		rec(30, "DescribeClusters", "arn:aws:sts::111122223333:assumed-role/terraform/ci", "APN/1.0 HashiCorp/1.0 Terraform/1.9.0", "198.51.100.7")
	}
	for sec := range 120 {
		rec(sec, "ListClusters", "arn:aws:iam::111122223333:user/dashboard", "Grafana/10", "203.0.113.20")
		rec(sec, "ListServices", "arn:aws:iam::111122223333:user/dashboard", "Grafana/10", "203.0.113.20")
	}
	r, err := Run([]Input{input("trail.jsonl", joinLines(lines))}, Options{Groups: []Group{{Name: "once", Retry: sim.Retry{Disabled: true}}}, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var who *Who
	for _, b := range r.Buckets {
		if b.Throttled > 0 {
			who = b.Who
		} else if b.Who != nil {
			t.Errorf("%s: no throttles, and a Who", b.Category)
		}
	}
	if who == nil {
		t.Fatalf("no bucket throttled, or none with a Who: %+v", r.Buckets)
	}
	for name, tops := range map[string]Tops{"principal": who.Principals, "user agent": who.UserAgents, "source": who.Sources, "action": who.Actions} {
		if len(tops.ByThrottles) != 1 || len(tops.ByCalls) < 2 {
			t.Errorf("%s: %+v; want one by throttles (the burst's) and two by calls", name, tops)
		}
	}
	if got := who.Principals.ByThrottles[0]; got.Name != "arn:aws:sts::111122223333:assumed-role/terraform/ci" || got.Err != 0 {
		t.Errorf("top principal by throttles %+v", got)
	}
	if got := who.Actions.ByCalls[0]; got.Name != "DescribeClusters" || got.Count != 120 {
		t.Errorf("top action by calls %+v", got)
	}
	var text, page, js bytes.Buffer
	r.WriteText(&text)
	r.WriteHTML(&page)
	r.WriteJSON(&js)
	for form, s := range map[string]string{"text": text.String(), "html": page.String(), "json": js.String()} {
		if !strings.Contains(s, "Terraform/1.9.0") || !strings.Contains(s, "198.51.100.7") {
			t.Errorf("%s does not name the burst's user agent and address", form)
		}
	}
}

// TestTopAndThrottledOnly: rows come most throttled first; --top and
// --throttled-only bound them, and the counts still cover every bucket;
// a bucket listed among fewer has the row it has among all (its limits
// are searched alike, though the others' are not).
func TestTopAndThrottledOnly(t *testing.T) {
	var lines []string
	for i := range 120 {
		lines = append(lines, fmt.Sprintf(`{"eventTime":"2026-11-30T12:00:%02dZ","eventSource":"ecs.amazonaws.com","eventName":"ListServices","awsRegion":"us-east-1","userIdentity":{"accountId":"000000000001"}}`, i%60))
	}
	for range 120 {
		lines = append(lines, `{"eventTime":"2026-11-30T12:00:30Z","eventSource":"ecs.amazonaws.com","eventName":"DescribeClusters","awsRegion":"us-east-1","userIdentity":{"accountId":"999999999999"}}`)
	}
	var all *Report
	for _, tc := range []struct {
		opt  Options
		want []string
	}{
		{Options{}, []string{"999999999999", "000000000001"}},
		{Options{ThrottledOnly: true}, []string{"999999999999"}},
		{Options{Top: 1}, []string{"999999999999"}},
	} {
		tc.opt.TempDir = t.TempDir()
		r, err := Run([]Input{input("t.jsonl", joinLines(lines))}, tc.opt)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, b := range r.Buckets {
			got = append(got, b.Account)
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") || r.BucketCount != 2 || r.ThrottledBuckets != 1 {
			t.Errorf("%+v: rows %v of %d (%d throttled), want %v of 2 (1)", tc.opt, got, r.BucketCount, r.ThrottledBuckets, tc.want)
		}
		if all == nil {
			all = r
		} else if len(r.Buckets) > 0 && !reflect.DeepEqual(r.Buckets[0], all.Buckets[0]) {
			t.Errorf("%+v: the listed bucket's row\n%+v\ndiffers from its row among all\n%+v", tc.opt, r.Buckets[0], all.Buckets[0])
		}
		if r.Buckets[0].AdmitBurst == 0 {
			t.Errorf("%+v: no smallest admitting limits searched for the listed bucket", tc.opt)
		}
	}
}
