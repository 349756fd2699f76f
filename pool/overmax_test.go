package pool

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tollgate/tollgate/autoscale"
)

// TestReplacedRevisionOverMaxWhileItsRequestFinishes moves all traffic
// from a revision at max instances (1) whose instance runs a 4-second
// request: the new revision's instance starts beside it, the request
// finishes with 200, and meanwhile tollgate_pool_instances_over_max says
// one instance of the old revision is over max for a revision change;
// once it has finished, the series is gone.
func TestReplacedRevisionOverMaxWhileItsRequestFinishes(t *testing.T) {
	t.Parallel()
	eng := autoscale.Config{MinInstances: 1, MaxInstances: 1}
	p, reg := newTestPool(t, ServiceSpec{Name: "s", Runner: &serverRunner{tag: "v1"}, Template: "a", Engine: eng})
	runPool(t, p)
	h := p.Handler("s")
	eventually(t, 20*time.Second, "s-00001 not ready", func() bool {
		_, b, _ := get(t, h, "/")
		return strings.HasPrefix(b, "v1 s-00001")
	})
	long := make(chan string, 1)
	go func() {
		c, b, _ := get(t, h, "/?sleep=4s")
		long <- itoa(c) + " " + b
	}()
	eventually(t, 20*time.Second, "the long request never reached s-00001", func() bool {
		st, _ := p.Revisions("s")
		return len(st.Revisions) == 1 && p.Status()[0].InFlight == 1
	})
	if err := p.Apply([]ServiceSpec{{Name: "s", Runner: &serverRunner{tag: "v2"}, Template: "b", Engine: eng}}); err != nil {
		t.Fatal(err)
	}
	series := `
# HELP tollgate_pool_instances_over_max Instances of a service beyond its max instances, by the revision they belong to and why: a replaced revision's instances finishing their requests (revision_change), or unhealthy instances finishing theirs beside their replacements (unhealthy, for every revision with a liveness check), each for at most the request timeout and 15 minutes.
# TYPE tollgate_pool_instances_over_max gauge
tollgate_pool_instances_over_max{reason="revision_change",revision="s-00001",service="s"} 1
`
	eventually(t, 20*time.Second, "s-00001 never showed as over max", func() bool {
		return testutil.GatherAndCompare(reg, strings.NewReader(series), "tollgate_pool_instances_over_max") == nil
	})
	select {
	case got := <-long:
		t.Fatalf("the long request ended before the old revision was seen over max: %s", got)
	default:
	}
	if got := <-long; !strings.HasPrefix(got, "200 v1 s-00001") {
		t.Fatalf("the long request on the replaced revision: %s, want 200 from s-00001", got)
	}
	eventually(t, 20*time.Second, "s-00001 still over max after its request finished", func() bool {
		n, err := testutil.GatherAndCount(reg, "tollgate_pool_instances_over_max")
		return err == nil && n == 0
	})
}
