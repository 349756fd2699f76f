package cloudmap

import (
	"context"
	"fmt"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/redistest"
)

// cachedBytes sums the estimated sizes of the states r caches.
func cachedBytes(r *redisStore) (int64, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sum := int64(0)
	for _, c := range r.scopes {
		c.mu.RLock()
		if c.s != nil {
			sum += c.s.size
		}
		c.mu.RUnlock()
	}
	return sum, len(r.scopes)
}

// A node's cache of Redis state is bounded in bytes: after 60 accounts of
// about 6 KiB each, a node with a 64 KiB cache holds at most that (and
// one account's more), forgetting the least recently used, and still
// answers every account from Redis. (Before, it cached up to 4,096
// accounts whatever their size.)
func TestRedisCacheIsBoundedInBytes(t *testing.T) {
	srv := redistest.Start(t)
	client := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	t.Cleanup(func() { client.Close() })
	const bound = 64 << 10
	reg, err := New(Options{Redis: client, RedisCacheBytes: bound})
	if err != nil {
		t.Fatal(err)
	}
	rs := reg.store.(*redisStore)
	ctx := context.Background()
	pad := strings.Repeat("p", 500)
	scope := func(i int) Scope { return Scope{Account: fmt.Sprint("acct", i), Region: "us-east-1"} }
	var largest int64
	for i := range 60 {
		for j := range 8 {
			if err := reg.RegisterInstance(ctx, scope(i), "local", "web", fmt.Sprint("i-", j), map[string]string{"pad": pad}); err != nil {
				t.Fatal(err)
			}
		}
		rs.mu.Lock()
		c := rs.scopes[scope(i).key()]
		rs.mu.Unlock()
		c.mu.RLock()
		largest = max(largest, c.s.size)
		c.mu.RUnlock()
		if sum, n := cachedBytes(rs); sum > bound+largest {
			t.Fatalf("after %d accounts the cache holds %d accounts, %d bytes; want at most %d", i+1, n, sum, bound+largest)
		}
	}
	if largest < 4<<10 {
		t.Fatalf("an account holds %d bytes; the test wants more", largest)
	}
	if sum, n := cachedBytes(rs); n >= 60 || sum != rs.bytes {
		t.Fatalf("the cache holds %d accounts, %d bytes, and counts %d", n, sum, rs.bytes)
	}
	for i := range 60 {
		err := reg.view(ctx, scope(i).normal(), func(s *state) error {
			if sv, err := findByName(s, "local", "web"); err != nil || len(sv.Instances) != 8 {
				return fmt.Errorf("account %d: %v, %v", i, sv, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
