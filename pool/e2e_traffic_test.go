package pool_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/pool/traffic"
)

// TestProcessTrafficSplitsNinetyTen runs two revisions of the test
// service as real processes and splits 2,000 requests 90/10 between
// them: each share lands within 3 % of its target, and the canary's tag
// reaches only the new revision.
func TestProcessTrafficSplitsNinetyTen(t *testing.T) {
	parallelE2E(t)
	spec := pool.ServiceSpec{Name: "split", Runner: testRunner(t, "GENERATION=1"), Template: "gen1", Engine: autoscale.Config{MinInstances: 1}}
	p, url, _ := startPool(t, spec)
	waitFor(t, 60*time.Second, "split-00001 not ready", func() bool { return readyCount(p) == 1 })

	spec.Runner, spec.Template = testRunner(t, "GENERATION=2"), "gen2"
	spec.Traffic = []traffic.Target{{RevisionName: "split-00001", Percent: 90}, {LatestRevision: true, Percent: 10, Tag: "canary"}}
	if err := p.Apply([]pool.ServiceSpec{spec}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "split-00002 never became the latest ready revision", func() bool {
		ts, err := p.Revisions("split")
		return err == nil && len(ts.Revisions) == 2 && ts.Revisions[1].LatestReady && ts.Revisions[1].Percent == 10
	})
	got := map[string]int{}
	for i := range 2000 {
		code, body, _ := fetch(t, url+"/env")
		if code != 200 {
			t.Fatalf("request %d: %d %s", i, code, body)
		}
		switch {
		case strings.Contains(body, `"K_REVISION":"split-00001"`):
			got["split-00001"]++
		case strings.Contains(body, `"K_REVISION":"split-00002"`):
			got["split-00002"]++
		default:
			t.Fatalf("request %d reached neither revision: %s", i, body)
		}
	}
	for rev, want := range map[string]int{"split-00001": 1800, "split-00002": 200} {
		if d := got[rev] - want; d > 60 || d < -60 {
			t.Errorf("%s took %d of 2,000 requests, want %d ± 60 (3 %%)", rev, got[rev], want)
		}
	}
	t.Logf("2,000 requests at 90/10: %v", got)
	for i := range 20 {
		req, _ := http.NewRequest("GET", url+"/env", nil)
		req.Header.Set(traffic.TagHeader, "canary")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), `"K_REVISION":"split-00002"`) {
			t.Fatalf("tagged request %d: %d %s, want split-00002", i, resp.StatusCode, body)
		}
	}
}
