package gateway

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// benchHandler runs requests straight through the handler, without the
// network, to measure the gateway's own cost per decision.
func benchHandler(b *testing.B, newReq func(i int) *http.Request, perReq int) {
	benchHandlerWith(b, Options{}, newReq, perReq)
}

// benchHandlerWith is benchHandler with a gateway made from opts.
func benchHandlerWith(b *testing.B, opts Options, newReq func(i int) *http.Request, perReq int) {
	g, err := New(opts)
	if err != nil {
		b.Fatal(err)
	}
	// Requests are built before the clock starts; each loop only rewinds
	// a prepared body.
	reqs := make([]*http.Request, 1024)
	bodies := make([][]byte, len(reqs))
	for i := range reqs {
		reqs[i] = newReq(i)
		bodies[i], _ = io.ReadAll(reqs[i].Body)
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		r := reqs[i%len(reqs)]
		r.Body = io.NopCloser(bytes.NewReader(bodies[i%len(reqs)]))
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		if w.Code != 200 && w.Code != 429 && w.Code != 400 {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
		i++
	}
	b.ReportMetric(float64(b.N*perReq)/b.Elapsed().Seconds(), "decisions/s")
}

func BenchmarkTake(b *testing.B) {
	benchHandler(b, func(i int) *http.Request {
		body := fmt.Sprintf(`{"service":"ecs","account":"%012d","region":"us-east-1","action":"DescribeClusters"}`, i)
		return httptest.NewRequest("POST", "/v1/take", strings.NewReader(body))
	}, 1)
}

func BenchmarkAWS(b *testing.B) {
	benchHandler(b, func(i int) *http.Request {
		r := httptest.NewRequest("POST", "/", strings.NewReader("{}"))
		r.Header.Set("Content-Type", contentTypeAWSJSON)
		r.Header.Set("X-Amz-Target", ecsTarget+"DescribeClusters")
		r.Header.Set("Authorization", sigv4(fmt.Sprintf("AKID%08d", i), "us-east-1", "ecs"))
		return r
	}, 1)
}

// BenchmarkBatch100 spreads its takes over 10,000 accounts, as the load
// generator does by default.
func BenchmarkBatch100(b *testing.B) {
	benchHandler(b, func(i int) *http.Request {
		var sb strings.Builder
		sb.WriteString(`{"service":"ecs","region":"us-east-1","requests":[`)
		for j := range 100 {
			if j > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"account":"%012d","action":"ListClusters"}`, (i*100+j)%10000)
		}
		sb.WriteString("]}")
		return httptest.NewRequest("POST", "/v1/take/batch", strings.NewReader(sb.String()))
	}, 100)
}
