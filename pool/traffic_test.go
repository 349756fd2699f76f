package pool

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/pool/traffic"
)

// getHost sends one GET through h with the given Host and headers (name,
// value pairs) and returns the status and body.
func getHost(h http.Handler, host string, header ...string) (int, string) {
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Host = host
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// TestTrafficCanaryTagThenSplitThenPromote walks a canary through the
// pool: a tag reaches the new revision before it takes traffic, a split
// set through the admin endpoint lands within 3 % of its shares over
// 2,000 requests without losing one while it changes, and promoting the
// latest drains the old revision.
func TestTrafficCanaryTagThenSplitThenPromote(t *testing.T) {
	t.Parallel()
	r1 := &serverRunner{tag: "v1"}
	p, reg := newTestPool(t, ServiceSpec{Name: "s", Runner: r1, Template: "a", Engine: autoscale.Config{MinInstances: 1}})
	runPool(t, p)
	h := p.Handler("s")
	eventually(t, 20*time.Second, "s-00001 not ready", func() bool {
		_, b, _ := get(t, h, "/")
		return strings.HasPrefix(b, "v1 s-00001")
	})

	// A new template with the new revision only tagged: it runs, takes no
	// untagged request, and its tag reaches it.
	r2 := &serverRunner{tag: "v2"}
	err := p.Apply([]ServiceSpec{{Name: "s", Runner: r2, Template: "b", Engine: autoscale.Config{MinInstances: 1},
		Traffic: []traffic.Target{{RevisionName: "s-00001", Percent: 100}, {RevisionName: "s-00002", Tag: "canary"}}}})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the canary tag never reached s-00002", func() bool {
		_, b := getHost(h, "canary---s.example.com")
		return strings.HasPrefix(b, "v2 s-00002")
	})
	for i := range 50 {
		if c, b := getHost(h, "s.example.com"); c != 200 || !strings.HasPrefix(b, "v1 s-00001") {
			t.Fatalf("untagged request %d: %d %q, want s-00001 (s-00002 takes 0 %%)", i, c, b)
		}
		if c, b := getHost(h, "s.example.com", traffic.TagHeader, "canary"); c != 200 || !strings.HasPrefix(b, "v2 s-00002") {
			t.Fatalf("request %d tagged by header: %d %q, want s-00002", i, c, b)
		}
		if c, b := getHost(h, "canary---s.example.com"); c != 200 || !strings.HasPrefix(b, "v2 s-00002") {
			t.Fatalf("request %d tagged by host: %d %q, want s-00002", i, c, b)
		}
		// DNS is case-insensitive, and so are tags.
		if c, b := getHost(h, "CANARY---s.example.com"); c != 200 || !strings.HasPrefix(b, "v2 s-00002") {
			t.Fatalf("request %d tagged by an upper-case host: %d %q, want s-00002", i, c, b)
		}
		if c, b := getHost(h, "s.example.com", traffic.TagHeader, "Canary"); c != 200 || !strings.HasPrefix(b, "v2 s-00002") {
			t.Fatalf("request %d tagged by a capitalised header: %d %q, want s-00002", i, c, b)
		}
	}
	if c, _ := getHost(h, "nope---s.example.com"); c != http.StatusNotFound {
		t.Fatalf("unknown tag: %d, want 404", c)
	}

	// The split moves through the admin endpoint while requests run:
	// none is lost.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	failed := make(chan string, 1)
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				if c, b := getHost(h, "s.example.com"); c != 200 {
					select {
					case failed <- b:
					default:
					}
				}
			}
		})
	}
	admin := http.NewServeMux()
	admin.Handle("/v1/admin/pools/{service}/traffic", p.RevisionsHandler())
	body := `{"traffic": [{"revision": "s-00001", "percent": 90}, {"revision": "s-00002", "percent": 10, "tag": "canary"}]}`
	req := httptest.NewRequest(http.MethodPut, "/v1/admin/pools/s/traffic", strings.NewReader(body))
	rec := httptest.NewRecorder()
	time.Sleep(100 * time.Millisecond)
	admin.ServeHTTP(rec, req)
	time.Sleep(100 * time.Millisecond)
	cancel()
	wg.Wait()
	if rec.Code != 200 {
		t.Fatalf("PUT traffic: %d %s", rec.Code, rec.Body)
	}
	select {
	case b := <-failed:
		t.Fatalf("a request failed while the traffic moved: %q", b)
	default:
	}
	var listed TrafficStatus
	if err := json.Unmarshal(rec.Body.Bytes(), &listed); err != nil {
		t.Fatal(err)
	}
	if len(listed.Revisions) != 2 || listed.Revisions[0].Percent != 90 || listed.Revisions[1].Percent != 10 ||
		strings.Join(listed.Revisions[1].Tags, ",") != "canary" || !listed.Revisions[1].Latest {
		t.Fatalf("listing after PUT: %s", rec.Body)
	}

	got := map[string]int{}
	for i := range 2000 {
		c, b := getHost(h, "s.example.com")
		if c != 200 {
			t.Fatalf("request %d: %d %q", i, c, b)
		}
		got[strings.Fields(b)[1]]++
	}
	for rev, want := range map[string]int{"s-00001": 1800, "s-00002": 200} {
		if d := got[rev] - want; d > 60 || d < -60 {
			t.Errorf("%s took %d of 2,000 requests, want %d ± 60 (3 %%): %v", rev, got[rev], want, got)
		}
	}

	// Promote the latest: the old revision drains and stops; it is kept
	// retired.
	if err := p.SetTraffic("s", []traffic.Target{{LatestRevision: true, Percent: 100}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "s-00001's instance was not stopped", func() bool { return r1.running() == 0 })
	seriesOf := func(rev string) int {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "revision" && l.GetValue() == rev {
						n++
					}
				}
			}
		}
		return n
	}
	eventually(t, 20*time.Second, "s-00001's series are still exported", func() bool { return seriesOf("s-00001") == 0 })
	if seriesOf("s-00002") == 0 {
		t.Fatal("no series labelled revision s-00002")
	}
	ts, err := p.Revisions("s")
	if err != nil || len(ts.Revisions) != 1 || ts.Revisions[0].Name != "s-00002" || ts.Revisions[0].Percent != 100 {
		t.Fatalf("revisions after promotion: %+v, %v", ts, err)
	}
	if len(ts.Retired) != 1 || ts.Retired[0].Name != "s-00001" {
		t.Fatalf("retired revisions after promotion: %+v; want s-00001 kept", ts.Retired)
	}
	// A rollback is a traffic change: the retired s-00001 runs again on
	// its own runner and takes the traffic once its instance is ready.
	if err := p.SetTraffic("s", []traffic.Target{{RevisionName: "s-00001", Percent: 100}}); err != nil {
		t.Fatalf("traffic back to the retired s-00001: %v", err)
	}
	for i := range 20 {
		if c, b := getHost(h, "s.example.com"); c != 200 || !strings.HasPrefix(b, "v1 s-00001") {
			t.Fatalf("request %d after the rollback: %d %q, want s-00001", i, c, b)
		}
	}
	if err := p.SetTraffic("s", []traffic.Target{{RevisionName: "s-00009", Percent: 100}}); !errors.Is(err, ErrInvalidSpec) {
		t.Fatalf("traffic to s-00009, never made: %v, want refused", err)
	}
}

// TestTrafficRefusedChangesNothing checks that a traffic block naming a
// revision the pool does not run is refused at reload, naming the entry,
// and leaves the service as it was.
func TestTrafficRefusedChangesNothing(t *testing.T) {
	t.Parallel()
	r1 := &serverRunner{tag: "v1"}
	spec := ServiceSpec{Name: "s", Runner: r1, Template: "a", Engine: autoscale.Config{MinInstances: 1}}
	p, _ := newTestPool(t, spec)
	runPool(t, p)
	bad := spec
	bad.Template = "b" // would make s-00002, but not s-00003
	bad.Traffic = []traffic.Target{{LatestRevision: true, Percent: 50}, {RevisionName: "s-00003", Percent: 50}}
	err := p.Apply([]ServiceSpec{bad})
	var te *traffic.Error
	if !errors.As(err, &te) || te.Entry != 1 || !errors.Is(err, ErrInvalidSpec) {
		t.Fatalf("Apply naming s-00003: %v, want a traffic.Error at entry 1", err)
	}
	ts, err := p.Revisions("s")
	if err != nil || len(ts.Revisions) != 1 || ts.Revisions[0].Name != "s-00001" || ts.Revisions[0].Percent != 100 || len(ts.Traffic) != 0 {
		t.Fatalf("after a refused reload: %+v, %v", ts, err)
	}
	if _, err := p.Revisions("nope"); !errors.Is(err, ErrNoService) {
		t.Fatalf("Revisions of an unknown service: %v", err)
	}
}

// TestTrafficKeepsAtMostMaxRevisions checks that a service keeps each
// revision its traffic tags, that a reload that would keep more than
// traffic.MaxRevisions running (the latest, the latest ready and those named) is
// refused, and that untagging the oldest makes room.
func TestTrafficKeepsAtMostMaxRevisions(t *testing.T) {
	t.Parallel()
	p, _ := newTestPool(t)
	tagged := func(from, to int) []traffic.Target {
		tr := []traffic.Target{{LatestRevision: true, Percent: 100}}
		for i := from; i <= to; i++ {
			tr = append(tr, traffic.Target{RevisionName: revisionName("s", i), Tag: "t" + itoa(i)})
		}
		return tr
	}
	apply := func(template int, traffic []traffic.Target) error {
		return p.Apply([]ServiceSpec{{Name: "s", Runner: &serverRunner{}, Template: itoa(template), Traffic: traffic}})
	}
	for i := 1; i <= traffic.MaxRevisions; i++ {
		if err := apply(i, tagged(1, i-1)); err != nil {
			t.Fatalf("revision %d: %v", i, err)
		}
	}
	// s-00001 to s-00009 tagged, s-00010 the latest ready, s-00011 new:
	// 11 to run, though the block names only 9.
	err := apply(traffic.MaxRevisions+1, tagged(1, traffic.MaxRevisions-1))
	var te *traffic.Error
	if !errors.As(err, &te) || te.Entry != -1 {
		t.Fatalf("an 11th revision: %v, want refused", err)
	}
	if err := apply(traffic.MaxRevisions+1, tagged(2, traffic.MaxRevisions)); err != nil {
		t.Fatalf("an 11th revision with s-00001 untagged: %v", err)
	}
	ts, err := p.Revisions("s")
	if err != nil || len(ts.Revisions) != traffic.MaxRevisions || ts.Revisions[0].Name != "s-00002" || ts.Revisions[traffic.MaxRevisions-1].Name != revisionName("s", traffic.MaxRevisions+1) {
		t.Fatalf("revisions: %+v, %v", ts, err)
	}
}
