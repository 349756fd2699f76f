package gateway

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/limiter/limitertest"
	"github.com/tollgate/tollgate/limiter/memory"
)

// TestBatchDecidesAsSequentialTakes sends one batch to a gateway and the
// same takes one by one, at the same instant, to another: every result
// must be the same. The batch mixes takes that share a bucket (the same
// account and category, named by action or by category, the service
// given per take or shared) with takes that do not (another account,
// region, category or service, an override), looks with tokens 0, and
// runs buckets dry so that later takes are denied. The answers must be
// the same bytes too.
func TestBatchDecidesAsSequentialTakes(t *testing.T) {
	cfg, err := parseConfig("t.yaml", []byte("services:\n  - preset: ecs\n  - preset: cloudmap\noverrides:\n  - {service: ecs, account: \"7\", category: cluster-read, capacity: 100, refill_per_second: 40}\n"))
	if err != nil {
		t.Fatal(err)
	}
	takes := []string{
		`"account":"1","action":"ListClusters","tokens":30`,
		`"account":"1","category":"cluster-read","tokens":15`,
		`"account":"2","action":"ListClusters","tokens":30`,
		`"account":"1","action":"DescribeClusters","tokens":0`,
		`"account":"1","region":"eu-west-1","action":"ListClusters","tokens":50`,
		`"account":"1","action":"ListClusters","tokens":10`, // denied: 5 left
		`"account":"1","action":"ListClusters","tokens":5`,  // allowed: the last 5
		`"account":"1","action":"ListTasks","tokens":7`,
		`"account":"7","action":"ListClusters","tokens":60`, // the override's 100
		`"account":"7","action":"ListClusters","tokens":60`, // denied
		`"service":"cloudmap","account":"1","action":"DiscoverInstances","tokens":3`,
		`"service":"ecs","account":"2","category":"cluster-read"`,
		`"account":"1","action":"ListClusters"`,
		`"account":"3","action":"ListClusters","tokens":0`,
		`"account":"2","action":"ListClusters","tokens":19`,
		`"account":"2","action":"ListClusters"`,
	}
	newGateway := func() (*Gateway, *limitertest.Clock) {
		clock := limitertest.NewClock()
		g, err := New(Options{Limiter: memory.New(memory.Options{Now: clock.Now}), Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		return g, clock
	}
	post := func(g *Gateway, path, body string) string {
		w := httptest.NewRecorder()
		g.ServeHTTP(w, httptest.NewRequest("POST", path, strings.NewReader(body)))
		if w.Code != 200 && w.Code != 429 {
			t.Fatalf("%s %s: %d %s", path, body, w.Code, w.Body)
		}
		return w.Body.String()
	}
	batchG, batchClock := newGateway()
	seqG, seqClock := newGateway()
	for round := range 3 { // the second and third rounds start from buckets in debt
		var sb strings.Builder
		sb.WriteString(`{"service":"ecs","region":"us-east-1","requests":[`)
		for i, tk := range takes {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString("{" + tk + "}")
		}
		sb.WriteString("]}")
		var got BatchResponse
		var raw struct{ Results []json.RawMessage }
		batchBody := post(batchG, "/v1/take/batch", sb.String())
		if err := json.Unmarshal([]byte(batchBody), &got); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(batchBody), &raw); err != nil {
			t.Fatal(err)
		}
		if len(got.Results) != len(takes) {
			t.Fatalf("round %d: %d results for %d takes", round, len(got.Results), len(takes))
		}
		denied := 0
		for i, tk := range takes {
			body := `{` + tk
			if !strings.Contains(tk, `"service"`) {
				body += `,"service":"ecs"`
			}
			if !strings.Contains(tk, `"region"`) {
				body += `,"region":"us-east-1"`
			}
			var want TakeResponse
			takeBody := post(seqG, "/v1/take", body+"}")
			if err := json.Unmarshal([]byte(takeBody), &want); err != nil {
				t.Fatal(err)
			}
			if string(raw.Results[i]) != strings.TrimSuffix(takeBody, "\n") {
				t.Errorf("round %d take %d: batch wrote %s, /v1/take %s", round, i, raw.Results[i], takeBody)
			}
			if got.Results[i] != want {
				t.Errorf("round %d take %d (%s): batch %+v, sequential %+v", round, i, tk, got.Results[i], want)
			}
			if !want.Allowed {
				denied++
			}
		}
		if denied == 0 {
			t.Errorf("round %d: no take denied; the test does not cover shared buckets running dry", round)
		}
		batchClock.Advance(200_000_000) // 200 ms: part of the debt refills
		seqClock.Advance(200_000_000)
	}
}

// TestBatchRepeatedKindStillValidated: a take whose service and action an
// earlier take of the batch resolved is still checked in full, with the
// same errors as a take on its own.
func TestBatchRepeatedKindStillValidated(t *testing.T) {
	g, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ second, field string }{
		{`"account":"bad account"`, "requests[1].account"},
		{`"account":"2","region":"US"`, "requests[1].region"},
		{`"account":"2","tokens":-1`, "requests[1].tokens"},
		{`"account":"2","tokens":51`, "requests[1].tokens"},
	} {
		body := `{"service":"ecs","region":"us-east-1","requests":[{"account":"1","action":"ListClusters"},{"action":"ListClusters",` + c.second + `}]}`
		w := httptest.NewRecorder()
		g.ServeHTTP(w, httptest.NewRequest("POST", "/v1/take/batch", strings.NewReader(body)))
		var e nativeError
		json.Unmarshal(w.Body.Bytes(), &e)
		if w.Code != 400 || e.Field != c.field {
			t.Errorf("%s: %d %s, want 400 on %s", c.second, w.Code, w.Body, c.field)
		}
	}
}
