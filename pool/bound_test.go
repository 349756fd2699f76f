package pool

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/pool/traffic"
)

// boundSpec is service s on r2 (Template "b") with s-00001 bound to r1
// and a 90/10 split between s-00001 and the latest.
func boundSpec(r1, r2 Runner) ServiceSpec {
	return ServiceSpec{Name: "s", Runner: r2, Template: "b", Engine: autoscale.Config{MinInstances: 1},
		Bound:   []BoundRevision{{Name: "s-00001", Runner: r1, Where: "r1", Entry: 0}},
		Traffic: []traffic.Target{{RevisionName: "s-00001", Percent: 90}, {LatestRevision: true, Percent: 10}}}
}

// names lists the running revisions of service s.
func names(t *testing.T, p *Pool) []string {
	t.Helper()
	ts, err := p.Revisions("s")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range ts.Revisions {
		out = append(out, r.Name)
	}
	return out
}

// splitOf sends 100 untagged requests through h once both runners answer
// and counts the answers of each tag.
func splitOf(t *testing.T, p *Pool) map[string]int {
	t.Helper()
	h := p.Handler("s")
	eventually(t, 20*time.Second, "both revisions ready", func() bool {
		ts, _ := p.Revisions("s")
		ready := 0
		for _, r := range ts.Revisions {
			if r.Ready > 0 {
				ready++
			}
		}
		return ready == 2
	})
	got := map[string]int{}
	for range 100 {
		c, b, _ := get(t, h, "/")
		if c != http.StatusOK {
			t.Fatalf("request: %d %q", c, b)
		}
		got[strings.Join(strings.Fields(b)[:2], " ")]++
	}
	return got
}

// A bound revision runs under its name on its runner from the start, the
// latest is numbered after it, and the split holds: two pools in a row
// on the same spec (a restart) run the same revisions and route 90/10.
func TestBoundRevisionsKeepNamesAndSplitAcrossRestarts(t *testing.T) {
	t.Parallel()
	r1, r2 := &serverRunner{tag: "v1"}, &serverRunner{tag: "v2"}
	for i := range 2 {
		p, _ := newTestPool(t, boundSpec(r1, r2))
		stop := runPool(t, p)
		if got := names(t, p); len(got) != 2 || got[0] != "s-00001" || got[1] != "s-00002" {
			t.Fatalf("run %d: revisions %v, want [s-00001 s-00002]", i, got)
		}
		if got := splitOf(t, p); got["v1 s-00001"] != 90 || got["v2 s-00002"] != 10 {
			t.Fatalf("run %d: split %v, want 90 to v1 s-00001, 10 to v2 s-00002", i, got)
		}
		if ts, _ := p.Revisions("s"); ts.Revisions[0].Runs != "r1" || ts.Revisions[1].Runs != "" {
			t.Errorf("run %d: runs %q and %q, want r1 for the bound revision only", i, ts.Revisions[0].Runs, ts.Revisions[1].Runs)
		}
		stop()
	}
}

// The latest binding names the latest revision; a bound s-00004 makes
// the next one s-00005.
func TestBoundRevisionsNumberTheLatest(t *testing.T) {
	t.Parallel()
	r1, r2 := &serverRunner{tag: "v1"}, &serverRunner{tag: "v2"}
	s := boundSpec(r1, r2)
	s.Bound = append(s.Bound, BoundRevision{Name: "s-00003", Latest: true, Entry: 1})
	s.Traffic[1] = traffic.Target{RevisionName: "s-00003", Percent: 10}
	p, _ := newTestPool(t, s)
	if got := names(t, p); len(got) != 2 || got[0] != "s-00001" || got[1] != "s-00003" {
		t.Fatalf("revisions %v, want [s-00001 s-00003]", got)
	}
	s = boundSpec(r1, r2)
	s.Bound[0].Name, s.Traffic[0].RevisionName = "s-00004", "s-00004"
	p, _ = newTestPool(t, s)
	if got := names(t, p); len(got) != 2 || got[0] != "s-00004" || got[1] != "s-00005" {
		t.Fatalf("revisions %v, want [s-00004 s-00005]", got)
	}
}

// On a reload a new Deployment's revision continues the numbering, a
// running bound revision is kept, and bindings the running revisions
// contradict are refused at their entry, changing nothing.
func TestBoundRevisionsAtReload(t *testing.T) {
	t.Parallel()
	r1, r2, r3 := &serverRunner{tag: "v1"}, &serverRunner{tag: "v2"}, &serverRunner{tag: "v3"}
	p, _ := newTestPool(t, ServiceSpec{Name: "s", Runner: r1, Template: "a", Engine: autoscale.Config{MinInstances: 1}})
	runPool(t, p)
	if err := p.Apply([]ServiceSpec{boundSpec(r1, r2)}); err != nil {
		t.Fatal(err)
	}
	if got := names(t, p); len(got) != 2 || got[0] != "s-00001" || got[1] != "s-00002" {
		t.Fatalf("revisions %v, want [s-00001 s-00002]", got)
	}
	if got := splitOf(t, p); got["v1 s-00001"] != 90 || got["v2 s-00002"] != 10 {
		t.Fatalf("split %v, want 90/10", got)
	}
	refused := func(s ServiceSpec, entry int, msg string) {
		t.Helper()
		var te *traffic.Error
		if err := p.Apply([]ServiceSpec{s}); !errors.As(err, &te) || te.Entry != entry || !strings.Contains(te.Msg, msg) || !errors.Is(err, ErrInvalidSpec) {
			t.Fatalf("err = %v, want entry %d: ...%s...", err, entry, msg)
		}
		if got := names(t, p); len(got) != 2 || got[0] != "s-00001" || got[1] != "s-00002" {
			t.Fatalf("after a refused reload: revisions %v", got)
		}
	}
	// s-00001 runs on r1, not r3.
	s := boundSpec(r3, r2)
	s.Bound[0].Where = "r3"
	refused(s, 0, "revision s-00001 runs on r1, not r3")
	// r1 runs s-00001, not s-00003.
	s = boundSpec(r1, r2)
	s.Bound[0].Name, s.Traffic[0].RevisionName = "s-00003", "s-00003"
	refused(s, 0, "r1 already runs revision s-00001: bind it under that name")
	// The latest (template b, unchanged) is s-00002.
	s = boundSpec(r1, r2)
	s.Bound = append(s.Bound, BoundRevision{Name: "s-00004", Latest: true, Where: "r2", Entry: 1})
	refused(s, 1, "r2 runs the latest revision, s-00002: bind it under that name")
	// A changed template cannot take a running revision's name.
	s = boundSpec(r1, r3)
	s.Template = "c"
	s.Bound = append(s.Bound, BoundRevision{Name: "s-00002", Latest: true, Where: "r3", Entry: 1})
	refused(s, 1, "revision s-00002 is already running")
	// Bound names are the pool's.
	s = boundSpec(r1, r2)
	s.Bound[0].Name = "s-1"
	refused(s, 0, `bound revision "s-1" is not named as revisions are`)
}

// A service whose spec fixes its traffic refuses SetTraffic with
// ErrTrafficFixed, and the endpoint answers 409 with the reason.
func TestTrafficFixedRefusesSetTraffic(t *testing.T) {
	t.Parallel()
	s := boundSpec(&serverRunner{tag: "v1"}, &serverRunner{tag: "v2"})
	s.TrafficFixed = "set in the config"
	p, _ := newTestPool(t, s)
	if err := p.SetTraffic("s", []traffic.Target{{LatestRevision: true, Percent: 100}}); !errors.Is(err, ErrTrafficFixed) || !strings.Contains(err.Error(), "set in the config") {
		t.Fatalf("SetTraffic: %v, want ErrTrafficFixed", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/admin/pools/{service}/traffic", p.RevisionsHandler())
	req := httptest.NewRequest(http.MethodPut, "/v1/admin/pools/s/traffic", strings.NewReader(`{"traffic": [{"latest_revision": true, "percent": 100}]}`))
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	if rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), "set in the config") {
		t.Fatalf("PUT: %d %q, want 409", rec.Code, rec.Body.String())
	}
	if ts, _ := p.Revisions("s"); len(ts.Traffic) != 2 || ts.Traffic[0].Percent != 90 {
		t.Fatalf("traffic changed: %+v", ts.Traffic)
	}
}
