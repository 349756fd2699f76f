package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	sd "github.com/aws/aws-sdk-go-v2/service/servicediscovery"
	"github.com/aws/smithy-go/middleware"

	"github.com/tollgate/tollgate/cloudmap"
	"github.com/tollgate/tollgate/gateway"
)

// hosts is an SDK HTTP client that records the host of every request and
// sends only those addressed to allowed.
type hosts struct {
	allowed string
	mu      sync.Mutex
	seen    []string
}

var errWrongHost = errors.New("request to a host other than the server's")

func (h *hosts) Do(r *http.Request) (*http.Response, error) {
	h.mu.Lock()
	h.seen = append(h.seen, r.URL.Host)
	h.mu.Unlock()
	if r.URL.Host != h.allowed {
		return nil, errWrongHost
	}
	return http.DefaultClient.Do(r)
}

func newGateway(t *testing.T) (*httptest.Server, *hosts) {
	t.Helper()
	reg, err := cloudmap.New(cloudmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(gateway.Options{Handlers: map[string]http.Handler{"cloudmap": reg}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return srv, &hosts{allowed: u.Host}
}

// The documented client reaches a real tollgate gateway, with its Cloud
// Map registry, at the endpoint's own host and discovers what it
// registered; run twice, it finds the namespace and service already there.
func TestRunAgainstGateway(t *testing.T) {
	srv, h := newGateway(t)
	for range 2 {
		var out bytes.Buffer
		err := run(context.Background(), srv.URL, &out, func(o *sd.Options) { o.HTTPClient = h })
		if err != nil {
			t.Fatalf("run: %v (hosts %v)", err, h.seen)
		}
		if got, want := out.String(), "DiscoverInstances: 1 instance(s)\n  web-1 at 127.0.0.1:8081\n"; got != want {
			t.Fatalf("output %q, want %q", got, want)
		}
	}
	for _, host := range h.seen {
		if host != h.allowed {
			t.Fatalf("hosts %v, want only %s", h.seen, h.allowed)
		}
	}
}

// Without disableHostPrefix the SDK sends DiscoverInstances to "data-" and
// the endpoint's host: the reason the program needs it.
func TestWithoutTheFixTheHostIsPrefixed(t *testing.T) {
	srv, h := newGateway(t)
	noFix := func(o *sd.Options) { o.APIOptions = []func(*middleware.Stack) error{}; o.HTTPClient = h }
	err := run(context.Background(), srv.URL, &bytes.Buffer{}, noFix)
	if !errors.Is(err, errWrongHost) || len(h.seen) == 0 || h.seen[len(h.seen)-1] != "data-"+h.allowed {
		t.Fatalf("err = %v, hosts %v; want DiscoverInstances sent to data-%s", err, h.seen, h.allowed)
	}
}
