package gateway

import (
	"log/slog"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/redistest"
	redisstore "github.com/tollgate/tollgate/limiter/redis"
	"github.com/tollgate/tollgate/liveview"
)

// TestLiveStoreFailurePolicy checks that the store endpoint names each of
// the Redis store's failure policies as --store-on-failure does: the
// default, local, is neither open nor closed.
func TestLiveStoreFailurePolicy(t *testing.T) {
	t.Parallel()                    // its own servers
	dead := redistest.ClosedAddr(t) // the policy is reported whether Redis answers or not
	client := goredis.NewClient(&goredis.Options{Addr: dead, MaxRetries: -1})
	defer client.Close()
	for _, tc := range []struct {
		policy redisstore.FailurePolicy
		want   string
	}{
		{redisstore.FailLocal, "local"},
		{redisstore.FailOpen, "open"},
		{redisstore.FailClosed, "closed"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			s := redisstore.New(client, redisstore.Options{FailurePolicy: tc.policy, Timeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)})
			t.Cleanup(func() { s.Close() })
			_, srv := newTestServer(t, nil, Options{AdminToken: "tok", Limiter: s, Live: liveview.New(liveview.Options{})})
			var st liveStore
			if status := getJSON(t, srv.URL+"/v1/admin/live/store", "tok", &st); status != 200 || st.Kind != "redis" || st.FailurePolicy != tc.want {
				t.Errorf("store %d %+v: failure_policy %q, want %q", status, st, st.FailurePolicy, tc.want)
			}
		})
	}
}
