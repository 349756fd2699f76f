package redistest

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

func TestStartStopRestart(t *testing.T) {
	s := Start(t)
	c := goredis.NewClient(&goredis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if save := c.ConfigGet(ctx, "save").Val()["save"]; save != "" {
		t.Fatalf("server persists: save %q", save)
	}
	s.Stop()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("stopped server answers PING")
	}
	s.Restart()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("restarted server: %v", err)
	}
	if n := c.Exists(ctx, "k").Val(); n != 0 {
		t.Fatal("restarted server kept its data")
	}
}

func TestPauseResume(t *testing.T) {
	s := Start(t)
	c := goredis.NewClient(&goredis.Options{Addr: s.Addr, MaxRetries: -1, ContextTimeoutEnabled: true})
	defer c.Close()
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Pause()
	// A paused server accepts nothing into its replies: the command
	// waits until its context ends.
	pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err := c.Get(pctx, "k").Err()
	cancel()
	if err == nil {
		t.Fatal("paused server answered")
	}
	s.Resume()
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("resumed server: %q, %v; want its data kept", v, err)
	}
	// Stop kills a paused server too.
	s.Pause()
	s.Stop()
}

func TestStartCluster(t *testing.T) {
	s := StartCluster(t)
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{s.Addr}})
	defer c.Close()
	ctx := context.Background()
	if err := c.Set(ctx, "{a}x", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// A one-node cluster still refuses keys of several slots.
	if err := c.Do(ctx, "MGET", "{a}x", "{b}y").Err(); err == nil {
		t.Fatal("cluster accepted a cross-slot command")
	}
}

func TestSkipsWithoutRedisServer(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server missing anyway")
	}
	skipped := false
	t.Run("empty PATH", func(t *testing.T) {
		t.Setenv(RequireEnv, "")
		t.Setenv("PATH", t.TempDir())
		defer func() { skipped = t.Skipped() }()
		Start(t)
	})
	if !skipped {
		t.Fatal("Start did not skip without redis-server")
	}
}

// TestClosedAddr: the address refuses connections, and its port cannot be
// taken by a server while the test runs.
func TestClosedAddr(t *testing.T) {
	addr := ClosedAddr(t)
	if c, err := net.DialTimeout("tcp", addr, 10*time.Second); err == nil {
		c.Close()
		t.Fatalf("%s accepted a connection", addr)
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v, want connection refused", addr, err)
	}
	if l, err := net.Listen("tcp", addr); err == nil {
		l.Close()
		t.Fatalf("a server could listen on %s", addr)
	}
}
