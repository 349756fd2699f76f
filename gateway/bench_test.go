package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/awsjson"
	"github.com/tollgate/tollgate/limiter/limitertest"
	"github.com/tollgate/tollgate/limiter/memory"
)

// benchAccounts is how many accounts (and so buckets) every benchmark
// spreads its takes over, as the load generator does by default.
const benchAccounts = 10000

// benchCase is one gateway benchmark: its prepared requests, how many
// takes each holds, and the accounts to drain for the throttled path.
type benchCase struct {
	reqs     []*http.Request
	bodies   [][]byte // reqs[i]'s body, rewound for every run
	perReq   int
	drain    []string          // accounts whose cluster-read bucket starts empty
	advance  time.Duration     // fake time per request on the allowed path
	verifier *awsjson.Verifier // Options.Verifier
}

// benchHandler runs requests straight through the handler, without the
// network, to measure the gateway's own cost per decision, on one path:
//
//   - allowed: the fake clock moves on with every request, so each bucket
//     has refilled by the time its account comes round again;
//   - throttled: every bucket is emptied first and the clock stands still.
//
// Afterwards it checks from the gateway's own counters that every decision
// took the path the benchmark is named for.
func benchHandler(b *testing.B, c benchCase, throttled bool) {
	clock := limitertest.NewClock()
	reg := prometheus.NewRegistry()
	g, err := New(Options{Limiter: memory.New(memory.Options{Now: clock.Now}), Registry: reg, Verifier: c.verifier})
	if err != nil {
		b.Fatal(err)
	}
	if throttled {
		for _, acct := range c.drain {
			w := httptest.NewRecorder()
			g.ServeHTTP(w, httptest.NewRequest("POST", "/v1/take", strings.NewReader(
				`{"service":"ecs","account":"`+acct+`","region":"us-east-1","category":"cluster-read","tokens":50}`)))
			if w.Code != 200 {
				b.Fatalf("draining %s: %d %s", acct, w.Code, w.Body)
			}
		}
	}
	before := decisionCounts(b, reg)
	// Requests are built before the clock starts; each loop only rewinds
	// a prepared body.
	bodies := c.bodies
	advance := c.advance
	if throttled {
		advance = 0
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		r := c.reqs[i%len(c.reqs)]
		r.Body = io.NopCloser(bytes.NewReader(bodies[i%len(c.reqs)]))
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		if w.Code != 200 && w.Code != 429 && (w.Code != 400 || w.Header().Get("X-Amzn-ErrorType") != "ThrottlingException") {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
		clock.Advance(advance)
		i++
	}
	b.ReportMetric(float64(b.N*c.perReq)/b.Elapsed().Seconds(), "decisions/s")
	b.StopTimer()
	after := decisionCounts(b, reg)
	allowed, denied := after["allowed"]-before["allowed"], after["throttled"]-before["throttled"]
	if want := float64(b.N * c.perReq); allowed+denied != want || (throttled && allowed != 0) || (!throttled && denied != 0) {
		b.Fatalf("%v allowed and %v throttled of %v decisions: not the path this benchmark measures", allowed, denied, want)
	}
}

// decisionCounts sums tollgate_decisions_total by result.
func decisionCounts(b *testing.B, reg *prometheus.Registry) map[string]float64 {
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	n := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "tollgate_decisions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" {
					n[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

func runPaths(b *testing.B, c benchCase) {
	for _, r := range c.reqs {
		body, _ := io.ReadAll(r.Body)
		c.bodies = append(c.bodies, body)
	}
	b.Run("allowed", func(b *testing.B) { benchHandler(b, c, false) })
	b.Run("throttled", func(b *testing.B) { benchHandler(b, c, true) })
}

func benchAccount(i int) string { return fmt.Sprintf("%012d", i) }

// BenchmarkTake: POST /v1/take, one take per request, cycling 10,000
// accounts. Allowed: 10 µs of fake time per request, so an account comes
// round after 100 ms, two tokens' refill.
func BenchmarkTake(b *testing.B) {
	c := benchCase{perReq: 1, advance: 10 * time.Microsecond}
	for i := range benchAccounts {
		body := `{"service":"ecs","account":"` + benchAccount(i) + `","region":"us-east-1","action":"DescribeClusters"}`
		c.reqs = append(c.reqs, httptest.NewRequest("POST", "/v1/take", strings.NewReader(body)))
		c.drain = append(c.drain, benchAccount(i))
	}
	runPaths(b, c)
}

// BenchmarkAWS: AWS JSON 1.1 DescribeClusters, cycling 10,000 access keys
// (each its own account), as BenchmarkTake.
func BenchmarkAWS(b *testing.B) {
	c := benchCase{perReq: 1, advance: 10 * time.Microsecond}
	for i := range benchAccounts {
		akid := fmt.Sprintf("AKID%08d", i)
		r := httptest.NewRequest("POST", "/", strings.NewReader("{}"))
		r.Header.Set("Content-Type", awsjson.ContentType)
		r.Header.Set("X-Amz-Target", ecsTarget+"DescribeClusters")
		r.Header.Set("Authorization", sigv4(akid, "us-east-1", "ecs"))
		c.reqs = append(c.reqs, r)
		c.drain = append(c.drain, akid)
	}
	runPaths(b, c)
}

// BenchmarkAWSVerified: BenchmarkAWS with SigV4 verified (--credentials):
// every request signed by aws-sdk-go-v2's signer with its key's secret,
// 10,000 keys in the credentials file.
func BenchmarkAWSVerified(b *testing.B) {
	signedAt := time.Date(2026, 12, 5, 3, 15, 0, 0, time.UTC)
	var file strings.Builder
	c := benchCase{perReq: 1, advance: 10 * time.Microsecond}
	signer := v4.NewSigner()
	for i := range benchAccounts {
		akid := fmt.Sprintf("AKID%08d", i)
		secret := fmt.Sprintf("secret-%08d", i)
		fmt.Fprintf(&file, "[k%d]\naws_access_key_id = %s\naws_secret_access_key = %s\n", i, akid, secret)
		r := httptest.NewRequest("POST", "/", strings.NewReader("{}"))
		r.Header.Set("Content-Type", awsjson.ContentType)
		r.Header.Set("X-Amz-Target", ecsTarget+"DescribeClusters")
		sum := sha256.Sum256([]byte("{}"))
		if err := signer.SignHTTP(context.Background(), aws.Credentials{AccessKeyID: akid, SecretAccessKey: secret}, r,
			hex.EncodeToString(sum[:]), "ecs", "us-east-1", signedAt); err != nil {
			b.Fatal(err)
		}
		c.reqs = append(c.reqs, r)
		c.drain = append(c.drain, akid)
	}
	creds, err := awsjson.ParseCredentials([]byte(file.String()))
	if err != nil {
		b.Fatal(err)
	}
	// With the failure bound, as tollgate serve runs it: every request
	// is admitted by it and tells it its outcome.
	c.verifier = awsjson.NewVerifier(creds, awsjson.VerifierOptions{Now: func() time.Time { return signedAt },
		Failures: awsjson.NewFailureBound(awsjson.FailureOptions{})})
	// Each key's signing key is derived once a day: derive them before
	// the clock starts, so the figure is the steady state.
	for _, r := range c.reqs {
		if _, e := c.verifier.Verify(r, []byte("{}"), "192.0.2.1:1"); e != nil {
			b.Fatal(e)
		}
	}
	runPaths(b, c)
}

// BenchmarkBatch100: POST /v1/take/batch of 100 takes, 100 batches that
// together cover the 10,000 accounts once. Allowed: 1 ms of fake time per
// batch, so an account comes round after 100 ms.
func BenchmarkBatch100(b *testing.B) {
	c := benchCase{perReq: 100, advance: time.Millisecond}
	for i := range benchAccounts / 100 {
		var sb strings.Builder
		sb.WriteString(`{"service":"ecs","region":"us-east-1","requests":[`)
		for j := range 100 {
			if j > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"account":"%s","action":"ListClusters"}`, benchAccount(i*100+j))
		}
		sb.WriteString("]}")
		c.reqs = append(c.reqs, httptest.NewRequest("POST", "/v1/take/batch", strings.NewReader(sb.String())))
	}
	for i := range benchAccounts {
		c.drain = append(c.drain, benchAccount(i))
	}
	runPaths(b, c)
}

// BenchmarkBatchMaxSize: the largest batch the defaults accept, 1,000
// takes padded with whitespace to the 1 MiB body limit; its B/op is the
// transient memory of one such request.
func BenchmarkBatchMaxSize(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"service":"ecs","region":"us-east-1","requests":[`)
	for j := range DefaultMaxBatch {
		if j > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"account":"%s","action":"ListClusters"}`, benchAccount(j))
	}
	for sb.Len()+2 < DefaultMaxBodyBytes {
		sb.WriteByte(' ')
	}
	sb.WriteString("]}")
	c := benchCase{perReq: DefaultMaxBatch, advance: time.Second}
	for range 4 {
		c.reqs = append(c.reqs, httptest.NewRequest("POST", "/v1/take/batch", strings.NewReader(sb.String())))
	}
	for j := range DefaultMaxBatch {
		c.drain = append(c.drain, benchAccount(j))
	}
	runPaths(b, c)
}
