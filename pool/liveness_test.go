package pool

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/autoscale"
)

// probeCounter is a serverRunner handler that answers every request and
// counts the liveness probes among them.
type probeCounter struct {
	mu     sync.Mutex
	probes int
	paths  []string
}

func (c *probeCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("User-Agent") == "tollgate-liveness" {
		c.mu.Lock()
		c.probes++
		c.paths = append(c.paths, r.URL.RequestURI())
		c.mu.Unlock()
	}
	w.Write([]byte("ok\n"))
}

func (c *probeCounter) count() (int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.probes, append([]string(nil), c.paths...)
}

// TestLivenessProbesOnlyWhenConfigured: with a check, a ready instance
// gets probes of its path on its own address; without one, none, and the
// revision says it has no check (TestNewAppliesTheDefaults: no probe client).
func TestLivenessProbesOnlyWhenConfigured(t *testing.T) {
	t.Parallel()
	on, off := &probeCounter{}, &probeCounter{}
	p, _ := newTestPool(t,
		ServiceSpec{Name: "on", Runner: &serverRunner{handler: on}, Engine: autoscale.Config{MinInstances: 1},
			Liveness: &Liveness{Path: "/live?x=1", Period: 100 * time.Millisecond}},
		ServiceSpec{Name: "off", Runner: &serverRunner{handler: off}, Engine: autoscale.Config{MinInstances: 1}})
	runPool(t, p)
	eventually(t, 20*time.Second, "fewer than 3 probes of the instance with a liveness check", func() bool {
		n, _ := on.count()
		return n >= 3
	})
	if _, paths := on.count(); paths[0] != "/live?x=1" {
		t.Fatalf("probed %q, want /live?x=1", paths[0])
	}
	if n, _ := off.count(); n != 0 {
		t.Fatalf("%d probes of an instance without a liveness check", n)
	}
	p.mu.RLock()
	rv := p.services["off"].latest
	p.mu.RUnlock()
	if rv.State().Liveness {
		t.Fatal("a revision without a liveness check has one set up")
	}
	for _, st := range p.Status() {
		if len(st.Instances) != 1 || st.Instances[0].State != "ready" {
			t.Fatalf("%s: %+v, want one ready instance", st.Name, st.Instances)
		}
	}
}

// TestLivenessDefaultsAndBounds: Cloud Run's defaults fill the zero
// fields, and Apply refuses a check out of bounds, changing nothing.
func TestLivenessDefaultsAndBounds(t *testing.T) {
	if got := (Liveness{Path: "/h"}).WithDefaults(); got != (Liveness{Path: "/h", Period: 10 * time.Second, Timeout: time.Second, FailureThreshold: 3}) {
		t.Fatalf("defaults: %+v", got)
	}
	if got := (Liveness{Path: "/h", Period: 200 * time.Millisecond}).WithDefaults(); got.Timeout != 200*time.Millisecond {
		t.Fatalf("a period under the default timeout: timeout %v, want the period", got.Timeout)
	}
	for _, c := range []struct {
		l    Liveness
		want string
	}{
		{Liveness{}, "liveness path \"\""},
		{Liveness{Path: "healthz"}, "liveness path \"healthz\""},
		{Liveness{Path: "/" + strings.Repeat("x", 1024)}, "at most 1024 bytes"},
		{Liveness{Path: "/h", Period: -time.Second}, "liveness period -1s"},
		{Liveness{Path: "/h", Period: 2 * time.Hour}, "liveness period 2h0m0s"},
		{Liveness{Path: "/h", Period: time.Second, Timeout: 2 * time.Second}, "liveness timeout 2s not in (0, period 1s]"},
		{Liveness{Path: "/h", FailureThreshold: -1}, "liveness failure threshold -1"},
		{Liveness{Path: "/h", FailureThreshold: 1001}, "liveness failure threshold 1001"},
		{Liveness{Path: "/h", InitialDelay: -time.Second}, "liveness initial delay -1s"},
	} {
		p := New(Options{})
		l := c.l
		err := p.Apply([]ServiceSpec{{Name: "s", Runner: &serverRunner{}, Liveness: &l}})
		if !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want ErrInvalidSpec saying %q", c.l, err, c.want)
		}
		if len(p.Services()) != 0 {
			t.Errorf("%+v: a refused spec added a service", c.l)
		}
	}
}
