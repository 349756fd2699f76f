package redis

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/limitertest"
)

// newClient returns a client of srv closed when t ends.
func newClient(t testing.TB, srv *redistest.Server) goredis.UniversalClient {
	t.Helper()
	c, err := NewClient(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// newStore returns a store on client closed when t ends.
func newStore(t testing.TB, client goredis.UniversalClient, opts Options) *Store {
	t.Helper()
	s := New(client, opts)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel() // its own redis-server and stores
	srv := redistest.Start(t)
	client := newClient(t, srv)
	limitertest.Run(t, func(t *testing.T, c *limitertest.Clock) limiter.Limiter {
		return newStore(t, client, Options{Now: c.Now, Timeout: 5e9})
	})
}

func TestConformanceDenyCache(t *testing.T) {
	t.Parallel() // its own redis-server and stores
	srv := redistest.Start(t)
	client := newClient(t, srv)
	var stores []*Store
	limitertest.Run(t, func(t *testing.T, c *limitertest.Clock) limiter.Limiter {
		s := newStore(t, client, Options{Now: c.Now, Timeout: 5e9, DenyCache: true})
		stores = append(stores, s)
		return s
	})
	var cached uint64
	for _, s := range stores {
		cached += s.Stats().Cached
	}
	if cached == 0 {
		t.Fatal("the deny cache denied nothing locally during the suite")
	}
}

// TestConformanceCluster runs the suite on a Redis Cluster, where the store
// groups the takes of a pipeline by hash tag: the cluster refuses a script
// call whose keys span slots.
func TestConformanceCluster(t *testing.T) {
	t.Parallel() // its own redis-server and stores
	srv := redistest.StartCluster(t)
	client, err := NewClient("redis+cluster://" + srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	limitertest.Run(t, func(t *testing.T, c *limitertest.Clock) limiter.Limiter {
		s := newStore(t, client, Options{Now: c.Now, Timeout: 5e9, DenyCache: true})
		if !s.byTag {
			t.Fatal("a cluster store does not group takes by hash tag")
		}
		return s
	})
}

// TestClusterPrefixWithBrace checks that a prefix with a brace, which
// changes the keys' hash tags, still gets one slot per script call.
func TestClusterPrefixWithBrace(t *testing.T) {
	t.Parallel() // its own redis-server and stores
	srv := redistest.StartCluster(t)
	client, err := NewClient("redis+cluster://" + srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	s := newStore(t, client, Options{KeyPrefix: "x{", Timeout: 5 * time.Second})
	// Tag "t" for the store, but Redis hashes "a{t" and "b{t": two slots.
	reqs := []limiter.Request{{Key: "a{t}", Limit: clusterRead, Tokens: 1}, {Key: "b{t}", Limit: clusterRead, Tokens: 1}}
	out := make([]bucket.Decision, 2)
	if err := s.TakeBatch(context.Background(), reqs, out); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Redis != 2 || st.Errors != 0 {
		t.Fatalf("stats %+v: a script call spanned slots", st)
	}
}
