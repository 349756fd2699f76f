package pool_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/pool/traffic"
)

// revisionOf sends one GET of /env with the given headers (name, value
// pairs) and returns the revision that answered it.
func revisionOf(t *testing.T, url string, header ...string) string {
	t.Helper()
	req, err := http.NewRequest("GET", url+"/env", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, rev := range []string{"sticky-00001", "sticky-00002"} {
		if resp.StatusCode == 200 && strings.Contains(string(body), `"K_REVISION":"`+rev+`"`) {
			return rev
		}
	}
	t.Fatalf("GET /env %v: %d %s, from neither revision", header, resp.StatusCode, body)
	return ""
}

// TestProcessStickySplitByHeader runs two revisions of the test service
// as real processes, split 50/50 sticky by X-User-Id: 20 requests with
// one user's header all reach one revision; 200 users spread over both
// (100 ± 40 each: binomial(200, ½) has σ ≈ 7); requests without the
// header are split per request (exactly 50/50 over 100); the tag still
// wins over the header; and growing the new revision to 80 % (written
// with the latest first) moves users only toward it.
func TestProcessStickySplitByHeader(t *testing.T) {
	parallelE2E(t)
	spec := pool.ServiceSpec{Name: "sticky", Runner: testRunner(t, "GENERATION=1"), Template: "gen1",
		Engine: autoscale.Config{MinInstances: 1}, Sticky: traffic.Sticky{Header: "X-User-Id"}}
	p, url, _ := startPool(t, spec)
	waitFor(t, 60*time.Second, "sticky-00001 not ready", func() bool { return readyCount(p) == 1 })

	spec.Runner, spec.Template = testRunner(t, "GENERATION=2"), "gen2"
	spec.Traffic = []traffic.Target{{RevisionName: "sticky-00001", Percent: 50}, {LatestRevision: true, Percent: 50, Tag: "canary"}}
	if err := p.Apply([]pool.ServiceSpec{spec}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "sticky-00002 never became the latest ready revision", func() bool {
		ts, err := p.Revisions("sticky")
		return err == nil && len(ts.Revisions) == 2 && ts.Revisions[1].LatestReady && ts.Revisions[1].Percent == 50
	})

	if ts, err := p.Revisions("sticky"); err != nil || ts.Sticky == nil || ts.Sticky.Header != "X-User-Id" {
		t.Fatalf("Revisions: %+v %v, want sticky by X-User-Id", ts, err)
	}
	first := revisionOf(t, url, "X-User-Id", "alice")
	for i := range 20 {
		if got := revisionOf(t, url, "X-User-Id", "alice"); got != first {
			t.Fatalf("request %d of user alice on %s, the first on %s", i, got, first)
		}
	}
	users := map[string]string{}
	count := map[string]int{}
	for i := range 200 {
		u := fmt.Sprintf("user-%d", i)
		users[u] = revisionOf(t, url, "X-User-Id", u)
		count[users[u]]++
	}
	for _, rev := range []string{"sticky-00001", "sticky-00002"} {
		if n := count[rev]; n < 100-40 || n > 100+40 {
			t.Errorf("%s took %d of 200 users at 50/50, want 100 ± 40: %v", rev, n, count)
		}
	}
	t.Logf("200 users at 50/50 sticky: %v", count)
	keyless := map[string]int{}
	for range 100 {
		keyless[revisionOf(t, url)]++
	}
	if keyless["sticky-00001"] != 50 || keyless["sticky-00002"] != 50 {
		t.Errorf("100 requests without X-User-Id: %v, want 50/50 per request", keyless)
	}
	for u, rev := range users {
		if rev == "sticky-00001" {
			if got := revisionOf(t, url, "X-User-Id", u, traffic.TagHeader, "canary"); got != "sticky-00002" {
				t.Fatalf("user %s tagged canary reached %s, want sticky-00002: the tag wins", u, got)
			}
			break
		}
	}

	// The latest listed first: the order of the block does not matter,
	// the revisions' ages do.
	if err := p.SetTraffic("sticky", []traffic.Target{{LatestRevision: true, Percent: 80, Tag: "canary"}, {RevisionName: "sticky-00001", Percent: 20}}); err != nil {
		t.Fatal(err)
	}
	moved := 0
	for u, before := range users {
		after := revisionOf(t, url, "X-User-Id", u)
		if before == "sticky-00002" && after != before {
			t.Fatalf("user %s moved from sticky-00002 to %s when sticky-00002 grew to 80 %%", u, after)
		}
		if after != before {
			moved++
		}
	}
	t.Logf("50 → 80 %%: %d of 200 users moved to sticky-00002", moved)
	if moved < 60-35 || moved > 60+35 {
		t.Errorf("%d of 200 users moved at 50 → 80 %%, want 60 ± 35 (σ ≈ 6.5)", moved)
	}
}
