package pool

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/pool/traffic"
)

// TestGCKeptAsKnative: of retired revisions the newest 20 are kept
// whatever their age; an older one goes once it is both 48 h old and 15 h
// retired; never more than 1,000.
func TestGCKeptAsKnative(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	mk := func(n int, created, retired time.Duration) []keptRevision {
		var out []keptRevision
		for i := range n {
			out = append(out, keptRevision{name: fmt.Sprintf("s-%05d", i+1),
				created: now.Add(-created), retired: now.Add(-retired + time.Duration(i)*time.Millisecond)})
		}
		return out
	}
	for _, c := range []struct {
		name             string
		kept             []keptRevision
		want             int
		first            string
		created, retired time.Duration
	}{
		{"25 stale: the newest 20 stay", mk(25, 49*time.Hour, 16*time.Hour), 20, "s-00006", 0, 0},
		{"25 made 47 h ago: all stay", mk(25, 47*time.Hour, 16*time.Hour), 25, "s-00001", 0, 0},
		{"25 retired 14 h ago: all stay", mk(25, 49*time.Hour, 14*time.Hour), 25, "s-00001", 0, 0},
		{"1,005 fresh: the newest 1,000 stay", mk(1005, time.Hour, time.Hour), 1000, "s-00006", 0, 0},
	} {
		got := gcKept(c.kept, now)
		if len(got) != c.want || got[0].name != c.first {
			t.Errorf("%s: kept %d from %s; want %d from %s", c.name, len(got), got[0].name, c.want, c.first)
		}
	}
}

// TestPutToAllCarriesTheLoadHistory: under steady load on s-00001, a
// PUT giving s-00002 all the traffic carries s-00001's load history to
// it, as a rollout does: once its warm-up minimum is lifted, its count
// stays at the load's rather than falling and climbing back.
func TestPutToAllCarriesTheLoadHistory(t *testing.T) {
	t.Parallel()
	spec := ServiceSpec{Name: "s", Runner: &serverRunner{tag: "v1"}, Template: "a", Engine: autoscale.Config{MaxConcurrency: 1, MaxInstances: 10}}
	p, _ := newTestPool(t, spec)
	runPool(t, p)
	spec.Runner, spec.Template = &serverRunner{tag: "v2"}, "b"
	spec.Traffic = []traffic.Target{{RevisionName: "s-00001", Percent: 100}, {RevisionName: "s-00002", Tag: "next"}}
	if err := p.Apply([]ServiceSpec{spec}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p.Handler("s"))
	defer srv.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if resp, err := http.Get(srv.URL + "/?sleep=300ms"); err == nil {
					resp.Body.Close()
				}
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	rev := func(name string) *rev {
		p.mu.RLock()
		defer p.mu.RUnlock()
		return p.services["s"].revisionByName(name)
	}
	eventually(t, 30*time.Second, "s-00001 never recommended 4 under 4 clients", func() bool { return rev("s-00001").Serving() >= 4 })
	time.Sleep(5 * time.Second) // some history
	if err := p.SetTraffic("s", []traffic.Target{{RevisionName: "s-00002", Percent: 100}}); err != nil {
		t.Fatal(err)
	}
	rv := rev("s-00002")
	low := 100
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		n := rv.State().Recommended
		low = min(low, n)
	}
	if low < 3 {
		t.Fatalf("s-00002's count fell to %d after it took the traffic of 4 busy instances; want it kept at the load's (3 or more)", low)
	}
}

// TestKeptRevisionOnARunnerInUseIsNotRunAgain: two revisions made on one
// runner (on Kubernetes, the section's one Deployment): the retired one
// cannot run again beside the other, and the refusal says how to roll
// back instead.
func TestKeptRevisionOnARunnerInUseIsNotRunAgain(t *testing.T) {
	t.Parallel()
	r := &serverRunner{tag: "deployment"}
	p, _ := newTestPool(t, ServiceSpec{Name: "s", Runner: r, Template: "a"})
	if err := p.Apply([]ServiceSpec{{Name: "s", Runner: r, Template: "b"}}); err != nil {
		t.Fatal(err)
	}
	ts, err := p.Revisions("s")
	if err != nil || len(ts.Retired) != 1 || ts.Retired[0].Name != "s-00001" {
		t.Fatalf("retired: %+v %v; want s-00001", ts.Retired, err)
	}
	err = p.SetTraffic("s", []traffic.Target{{RevisionName: "s-00001", Percent: 100}})
	var te *traffic.Error
	if !errors.As(err, &te) || te.Entry != 0 || !strings.Contains(te.Msg, "now runs revision s-00002") {
		t.Fatalf("rollback onto a runner in use: %v; want refused at entry 0", err)
	}
}
