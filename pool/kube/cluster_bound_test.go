package kube

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/pool/traffic"
)

// Two tollgate replicas (leader election) with the same spec, as two
// nodes reading the same config: hello-00001 bound to Deployment
// hello-v1 takes 90 %, the latest, hello-00002 on hello-v2, 10 %. Each
// replica runs the same revisions under the same names, each Deployment
// is scaled by its own leader to its revision's minimum, and each
// replica's requests reach the two Deployments' pods 90/10.
func TestClusterTwoReplicasSplitBoundRevisions(t *testing.T) {
	c := newCluster(t)
	c.addDeployment(t, "hello-v1")
	c.addDeployment(t, "hello-v2")
	si := newStandIns(t)
	eng := autoscale.Config{MinInstances: 1, MaxInstances: 3, InitialColdStart: 5 * time.Second}
	type replica struct {
		p     *pool.Pool
		front *httptest.Server
	}
	var replicas []replica
	for _, id := range []string{"a", "b"} {
		log := slog.New(slog.NewTextHandler(testWriter{t}, nil)).With("replica", id)
		runner := func(name string) *Runner {
			return c.runner(t, c.cfg, func(o *Options) {
				o.Target.Deployment = name
				o.Address = si.address
				o.Registry = prometheus.NewRegistry()
				o.Logger = log
				o.Election = &Election{Identity: id, LeaseDuration: 8 * time.Second, RenewDeadline: 6 * time.Second, RetryPeriod: 500 * time.Millisecond}
			})
		}
		r1, r2 := runner("hello-v1"), runner("hello-v2")
		p := pool.New(pool.Options{Logger: log, Registry: prometheus.NewRegistry()})
		err := p.Apply([]pool.ServiceSpec{{Name: "hello", Runner: r2, Template: "kubernetes=hello-v2", Engine: eng,
			Bound:   []pool.BoundRevision{{Name: "hello-00001", Runner: r1, Where: "Deployment hello-v1"}},
			Traffic: []traffic.Target{{RevisionName: "hello-00001", Percent: 90}, {LatestRevision: true, Percent: 10}}}})
		if err != nil {
			t.Fatal(err)
		}
		runAll(t, r1.Run, r2.Run, p.Run)
		front := httptest.NewServer(p.Handler("hello"))
		t.Cleanup(front.Close)
		replicas = append(replicas, replica{p: p, front: front})
	}
	for i, rp := range replicas {
		c.waitFor(t, "hello-00001 and hello-00002 ready, 90/10", func() bool {
			ts, err := rp.p.Revisions("hello")
			if err != nil || len(ts.Revisions) != 2 {
				return false
			}
			a, b := ts.Revisions[0], ts.Revisions[1]
			return a.Name == "hello-00001" && b.Name == "hello-00002" && a.Ready >= 1 && b.Ready >= 1 && a.Percent == 90 && b.Percent == 10
		})
		t.Logf("replica %d runs hello-00001 and hello-00002", i)
	}
	c.waitFor(t, "each Deployment at its revision's minimum", func() bool {
		return c.replicasOf(t, "hello-v1") == 1 && c.replicasOf(t, "hello-v2") == 1
	})
	// Both replicas at once, 100 requests each in a row: each replica's
	// split is exact over 100 of its requests.
	var wg sync.WaitGroup
	counts := make([]map[string]int, len(replicas))
	for i, rp := range replicas {
		counts[i] = map[string]int{}
		wg.Go(func() {
			for range 100 {
				ctx, cancel := context.WithTimeout(context.Background(), clusterLong)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, rp.front.URL+"/", nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					cancel()
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
				resp.Body.Close()
				cancel()
				body := string(b)
				switch {
				case resp.StatusCode != http.StatusOK:
					t.Errorf("replica %d: %d %q", i, resp.StatusCode, body)
					return
				case strings.HasPrefix(body, "pod hello-v1-"):
					counts[i]["hello-v1"]++
				case strings.HasPrefix(body, "pod hello-v2-"):
					counts[i]["hello-v2"]++
				default:
					t.Errorf("replica %d: answered %q, want a pod of hello-v1 or hello-v2", i, body)
					return
				}
			}
		})
	}
	wg.Wait()
	for i, got := range counts {
		if got["hello-v1"] != 90 || got["hello-v2"] != 10 {
			t.Errorf("replica %d: %v, want 90 to hello-v1, 10 to hello-v2", i, got)
		}
	}
	if n1, n2 := c.replicasOf(t, "hello-v1"), c.replicasOf(t, "hello-v2"); n1 < 1 || n2 < 1 {
		t.Errorf("replicas hello-v1 %d, hello-v2 %d after the requests; want at least 1 each", n1, n2)
	}
}
