package gateway

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/tollgate/tollgate/liveview"
)

// BenchmarkLive measures the live view's cost per decision. Each
// iteration sends the same request to a gateway without a recorder and to
// one with it, alternating which goes first, and times each: on a shared
// machine the two see the same load, so the ratio of their median times
// (the on/off metric; the budget is 1.05) holds where separate runs drift.
//
// "control" has no recorder on either side, to show the method's own
// bias; "allowed" looks at 1,024 buckets without taking (every decision
// allowed); "throttled" sends every take to one empty bucket, so each
// decision also goes through the heavy-hitters summary; "churn" empties
// 1,024 buckets in turn, so the 128-key summary evicts on most throttled
// decisions, its worst case. The recorder runs (Recorder.Run) as in
// tollgate serve, folding throttled keys into its summary in the
// background; dropped/op is the share of throttles it could not count.
func BenchmarkLive(b *testing.B) {
	takeReq := func(account func(i int) int, tokens int) func(i int) (*http.Request, []byte) {
		return func(i int) (*http.Request, []byte) {
			body := fmt.Sprintf(`{"service":"ecs","account":"%012d","region":"us-east-1","action":"DescribeClusters","tokens":%d}`, account(i), tokens)
			return httptest.NewRequest("POST", "/v1/take", nil), []byte(body)
		}
	}
	cases := []struct {
		name    string
		newReq  func(i int) (*http.Request, []byte)
		control bool // no recorder on either side: the method's own bias
	}{
		{"control", takeReq(func(i int) int { return i }, 0), true},
		{"allowed", takeReq(func(i int) int { return i }, 0), false},
		{"throttled", takeReq(func(int) int { return 7 }, 1), false},
		{"churn", takeReq(func(i int) int { return i }, 50), false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			off, err := New(Options{})
			if err != nil {
				b.Fatal(err)
			}
			rec := liveview.New(liveview.Options{})
			opts := Options{Live: rec}
			if c.control {
				opts.Live = nil
			}
			ctx, cancel := context.WithCancel(context.Background())
			ran := make(chan error)
			go func() { ran <- rec.Run(ctx) }()
			defer func() { cancel(); <-ran }()
			on, err := New(opts)
			if err != nil {
				b.Fatal(err)
			}
			reqs := make([]*http.Request, 1024)
			bodies := make([][]byte, len(reqs))
			for i := range reqs {
				reqs[i], bodies[i] = c.newReq(i)
			}
			serve := func(g *Gateway, i int) time.Duration {
				r := reqs[i%len(reqs)]
				r.Body = io.NopCloser(bytes.NewReader(bodies[i%len(reqs)]))
				w := httptest.NewRecorder()
				start := time.Now()
				g.ServeHTTP(w, r)
				d := time.Since(start)
				if w.Code != 200 && w.Code != 429 {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
				return d
			}
			var tOff, tOn []time.Duration
			i := 0
			for b.Loop() {
				if i%2 == 0 {
					tOff = append(tOff, serve(off, i))
					tOn = append(tOn, serve(on, i))
				} else {
					tOn = append(tOn, serve(on, i))
					tOff = append(tOff, serve(off, i))
				}
				i++
			}
			// Medians: a GC pause or a preemption lands on one side only.
			mOff, mOn := median(tOff), median(tOn)
			b.ReportMetric(float64(mOff.Nanoseconds()), "off-ns/decision")
			b.ReportMetric(float64(mOn.Nanoseconds()), "on-ns/decision")
			b.ReportMetric(float64(mOn)/float64(mOff), "on/off")
			rec.Tick(time.Now().Add(time.Hour)) // fold what is left
			b.ReportMetric(float64(rec.Dropped())/float64(b.N), "dropped/op")
		})
	}
}

func median(ds []time.Duration) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[len(ds)/2]
}
