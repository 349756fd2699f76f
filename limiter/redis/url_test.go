package redis

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNewClientURLs(t *testing.T) {
	tests := []struct {
		url  string
		kind string // single, cluster, failover
		addr []string
		db   int
		user string
		pass string
		tls  bool
	}{
		{url: "redis://localhost:6379/0", kind: "single", addr: []string{"localhost:6379"}},
		{url: "redis://:s3cret@redis.internal:6380/2", kind: "single", addr: []string{"redis.internal:6380"}, db: 2, pass: "s3cret"},
		{url: "rediss://gw:pw@cache.example.com/1?dial_timeout=1s", kind: "single", addr: []string{"cache.example.com:6379"}, db: 1, user: "gw", pass: "pw", tls: true},
		{url: "unix://:pw@/run/redis.sock?db=3", kind: "single", addr: []string{"/run/redis.sock"}, db: 3, pass: "pw"},
		{url: "redis+cluster://:pw@10.0.0.1:7000?addr=10.0.0.2:7000&addr=10.0.0.3:7000", kind: "cluster", addr: []string{"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"}, pass: "pw"},
		{url: "rediss+cluster://10.0.0.1:7000", kind: "cluster", addr: []string{"10.0.0.1:7000"}, tls: true},
		{url: "redis://10.0.0.1:7000?addr=10.0.0.2:7000", kind: "cluster", addr: []string{"10.0.0.1:7000", "10.0.0.2:7000"}},
		{url: "redis+sentinel://:spw@10.0.0.1:26379/4?master_name=tollgate&addr=10.0.0.2:26379&password=datapw", kind: "failover", addr: []string{"10.0.0.1:26379", "10.0.0.2:26379"}, db: 4, pass: "datapw"},
		{url: "redis://10.0.0.1:26379?master_name=tollgate", kind: "failover", addr: []string{"10.0.0.1:26379"}},
	}
	for _, tc := range tests {
		cfg, err := parseURL(tc.url)
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		var kind string
		var addr []string
		var db int
		var user, pass string
		var tls, ctxTimeout bool
		switch {
		case cfg.single != nil:
			o := cfg.single
			kind, addr, db, user, pass, tls, ctxTimeout = "single", []string{o.Addr}, o.DB, o.Username, o.Password, o.TLSConfig != nil, o.ContextTimeoutEnabled
		case cfg.cluster != nil:
			o := cfg.cluster
			kind, addr, user, pass, tls, ctxTimeout = "cluster", o.Addrs, o.Username, o.Password, o.TLSConfig != nil, o.ContextTimeoutEnabled
		case cfg.failover != nil:
			o := cfg.failover
			kind, addr, db, user, pass, tls, ctxTimeout = "failover", o.SentinelAddrs, o.DB, o.Username, o.Password, o.TLSConfig != nil, o.ContextTimeoutEnabled
			if o.MasterName != "tollgate" {
				t.Errorf("%s: master %q", tc.url, o.MasterName)
			}
		}
		if kind != tc.kind || strings.Join(addr, ",") != strings.Join(tc.addr, ",") || db != tc.db || user != tc.user || pass != tc.pass || tls != tc.tls || !ctxTimeout {
			t.Errorf("%s: %s %v db %d user %q pass %q tls %v ctx %v; want %s %v db %d user %q pass %q tls %v", tc.url,
				kind, addr, db, user, pass, tls, ctxTimeout, tc.kind, tc.addr, tc.db, tc.user, tc.pass, tc.tls)
		}
	}
	if cfg, _ := parseURL("rediss://h/1?dial_timeout=1s"); cfg.single.DialTimeout != time.Second {
		t.Errorf("dial_timeout not applied: %v", cfg.single.DialTimeout)
	}
	c, err := NewClient("redis+cluster://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestNewClientBadURLs(t *testing.T) {
	for _, u := range []string{
		"",
		"memory://",
		"http://localhost:6379",
		"redis://:hunter2@localhost:6379/x",
		"redis://:hunter2@localhost:6379/1/2",
		"redis://:hunter2@localhost:6379?pool_size=many",
		"redis://:hunter2@localhost:6379?frobnicate=1",
		"redis+cluster://:hunter2@localhost:7000/3",
		"redis+sentinel://:hunter2@localhost:26379",
		"unix+cluster:///tmp/s",
		"redis+ring://localhost",
		"redis://:hunter2@localhost:port",
		"redis://:hunter2@[::1",
	} {
		_, err := NewClient(u)
		if !errors.Is(err, ErrInvalidURL) {
			t.Errorf("%q: error %v, want ErrInvalidURL", u, err)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%q: error repeats the password: %v", u, err)
		}
	}
}

// A URL missing one or both slashes after the scheme is called malformed,
// with the form it should have: go-redis read "rediss:/localhost"'s host
// as a database ("invalid database number: \"localhost\"").
func TestNewClientMalformedURLShowsTheForm(t *testing.T) {
	for u, want := range map[string]string{
		"rediss:/localhost":             `malformed URL (no "//" after "rediss:"): want rediss://host:port/db (e.g. rediss://127.0.0.1:6379/0)`,
		"redis:localhost:6379":          "want redis://host:port/db",
		"redis+cluster:/h:7000":         "want redis+cluster://host:port (e.g.",
		"rediss+sentinel:h?master_name": "want rediss+sentinel://host:port/db?master_name=NAME",
	} {
		_, err := NewClient(u)
		if !errors.Is(err, ErrInvalidURL) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want ErrInvalidURL with %q", u, err, want)
		}
	}
	for _, u := range []string{"redis://localhost", "REDIS://localhost:6379/0", "unix:/tmp/redis.sock", "unix:///tmp/redis.sock"} {
		if c, err := NewClient(u); err != nil {
			t.Errorf("%q: %v", u, err)
		} else {
			c.Close()
		}
	}
}

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"redis://localhost:6379/0", "rediss://u:p@h/1?dial_timeout=1s", "unix:///s?db=1",
		"redis+cluster://h:1?addr=h:2", "redis+sentinel://h:1?master_name=m", "redis://h?addr=x",
		"redis://:p@h:1/x", "%", "redis://[::1]:6379",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cfg, err := parseURL(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidURL) {
				t.Fatalf("%q: error %v does not wrap ErrInvalidURL", s, err)
			}
			return
		}
		n := 0
		for _, set := range []bool{cfg.single != nil, cfg.cluster != nil, cfg.failover != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%q: %d client kinds", s, n)
		}
	})
}
