package redis_test

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/internal/certtest"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/internal/tlsfiles"
	"github.com/tollgate/tollgate/limiter/redis"
)

// tlsRedis starts a redis-server that speaks only TLS, with a certificate
// of a CA of the test's own; with clientAuth it requires a client
// certificate of that CA. It returns the server and the CA, server and
// client files.
func tlsRedis(t *testing.T, clientAuth bool) (*redistest.Server, tlsfiles.Files) {
	t.Helper()
	dir := t.TempDir()
	ca := certtest.NewCA(t, "redis CA")
	files := redistest.TLS{CA: ca.WriteCA(dir, "ca.crt")}
	files.Cert, files.Key = ca.Issue("redis").Write(t, dir, "redis")
	client := tlsfiles.Files{CA: files.CA}
	client.Cert, client.Key = ca.Issue("tollgate").Write(t, dir, "client")
	if clientAuth {
		files.ClientCert, files.ClientKey = client.Cert, client.Key
	}
	return redistest.StartTLS(t, files), client
}

func ping(url string, tlsConfig func(string) *tls.Config) error {
	c, err := redis.NewClientTLS(url, tlsConfig)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.Ping(ctx).Err()
}

func loadFiles(t *testing.T, files tlsfiles.Files) *tlsfiles.Certs {
	t.Helper()
	c, err := tlsfiles.Load(files, tlsfiles.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRedissWithATestCA(t *testing.T) {
	t.Parallel() // its own redis-server and stores
	srv, client := tlsRedis(t, false)
	if !strings.HasPrefix(srv.URL(), "rediss://") {
		t.Fatalf("URL %s", srv.URL())
	}
	// go-redis's own TLS: the system roots, which do not hold the test CA.
	if err := ping(srv.URL(), nil); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("rediss:// with the system roots: %v, want a certificate error", err)
	}
	// Plaintext to a TLS port: no answer.
	if err := ping("redis://"+srv.Addr+"?dial_timeout=5s&read_timeout=5s", nil); err == nil {
		t.Error("redis:// to a TLS-only server answered")
	}
	certs := loadFiles(t, tlsfiles.Files{CA: client.CA})
	if err := ping(srv.URL(), certs.ClientConfig); err != nil {
		t.Fatalf("rediss:// with the test CA: %v", err)
	}
	// A store over TLS decides as over plaintext.
	store, err := redis.Open(srv.URL(), redis.Options{TLSConfig: certs.ClientConfig, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	limit := bucket.MustLimit(2, 0.001)
	var allowed int
	for range 3 {
		d, err := store.Take(ctx, "tls-key", limit, 1)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			allowed++
		}
	}
	if st := store.Stats(); allowed != 2 || st.Redis != 3 {
		t.Errorf("allowed %d of 3 takes of a bucket of 2, stats %+v; want 2, all decided by Redis", allowed, st)
	}
}

func TestRedissClientCertificate(t *testing.T) {
	t.Parallel() // its own redis-server and stores
	srv, client := tlsRedis(t, true)
	caOnly := loadFiles(t, tlsfiles.Files{CA: client.CA})
	if err := ping(srv.URL(), caOnly.ClientConfig); err == nil {
		t.Error("a Redis requiring client certificates answered a client without one")
	}
	withCert := loadFiles(t, client)
	if err := ping(srv.URL(), withCert.ClientConfig); err != nil {
		t.Errorf("with the client certificate: %v", err)
	}
}

func TestNewClientTLSNeedsATLSURL(t *testing.T) {
	cfg := func(name string) *tls.Config { return &tls.Config{ServerName: name} }
	for _, url := range []string{
		"redis://127.0.0.1:6379/0",
		"unix:///run/redis.sock",
		"redis+cluster://10.0.0.1:7000",
		"redis+sentinel://10.0.0.1:26379?master_name=m",
		"rediss://127.0.0.1:6380/0?skip_verify=true",
	} {
		c, err := redis.NewClientTLS(url, cfg)
		if err == nil {
			c.Close()
			t.Errorf("%s with TLS files: no error", url)
			continue
		}
		if !errors.Is(err, redis.ErrInvalidURL) {
			t.Errorf("%s: %v does not wrap ErrInvalidURL", url, err)
		}
	}
	var names []string
	for _, url := range []string{"rediss://cache.example.com:6380/0", "rediss+cluster://10.0.0.1:7000", "rediss+sentinel://10.0.0.1:26379?master_name=m"} {
		c, err := redis.NewClientTLS(url, func(name string) *tls.Config { names = append(names, name); return cfg(name) })
		if err != nil {
			t.Errorf("%s: %v", url, err)
			continue
		}
		c.Close()
	}
	if got := strings.Join(names, ","); got != "cache.example.com,10.0.0.1,10.0.0.1" {
		t.Errorf("server names %s", got)
	}
}
