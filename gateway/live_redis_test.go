package gateway

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/redistest"
	redisstore "github.com/tollgate/tollgate/limiter/redis"
	"github.com/tollgate/tollgate/liveview"
)

// TestLiveStoreRedis checks the store panel's endpoint against a real
// redis-server, before and after it stops.
func TestLiveStoreRedis(t *testing.T) {
	t.Parallel() // its own servers
	srvRedis := redistest.Start(t)
	// A timeout no loaded machine reaches: the first take is Redis's (a
	// stopped server refuses at once, so the outage below is quick too).
	store, err := redisstore.Open(srvRedis.URL(), redisstore.Options{FailurePolicy: redisstore.FailClosed, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	_, srv := newTestServer(t, nil, Options{AdminToken: "tok", Limiter: store, Live: liveview.New(liveview.Options{})})
	take(t, srv.URL, "111111111111", "DescribeClusters")
	var st liveStore
	var status int
	// The panel's ping has its own short timeout, which a loaded machine
	// may exceed once: ask again until Redis is reported ok.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		st = liveStore{}
		if status = getJSON(t, srv.URL+"/v1/admin/live/store", "tok", &st); status != 200 || st.State == "ok" || time.Now().After(deadline) {
			break
		}
	}
	if status != 200 || st.Kind != "redis" || st.State != "ok" ||
		st.FailurePolicy != "closed" || st.Decisions["redis"] != 1 || st.Errors == nil {
		t.Fatalf("store %d %+v, want redis, ok, fail closed, 1 decision by Redis", status, st)
	}
	srvRedis.Stop()
	take(t, srv.URL, "111111111111", "DescribeClusters") // decided by the failure policy
	st = liveStore{}
	if status := getJSON(t, srv.URL+"/v1/admin/live/store", "tok", &st); status != 200 || st.State != "unreachable" || st.Error == "" ||
		st.Decisions["failure_policy"] != 1 {
		t.Errorf("store after Redis stopped: %d %+v, want unreachable with an error and 1 decision by the failure policy", status, st)
	}
}
