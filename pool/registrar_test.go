package pool

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/autoscale"
)

// listing is a Registrar that keeps what it is told, as a registry would.
type listing struct {
	mu    sync.Mutex
	addrs map[string]string // instance → addr
	calls int
}

func (l *listing) Register(_ context.Context, instance, addr string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.addrs == nil {
		l.addrs = map[string]string{}
	}
	l.addrs[instance] = addr
	l.calls++
	return nil
}

func (l *listing) Deregister(_ context.Context, instance string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.addrs, instance)
	l.calls++
	return nil
}

func (l *listing) names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Sorted(maps.Keys(l.addrs))
}

// readyNames lists the pool's ready instances.
func readyNames(p *Pool) []string {
	var out []string
	for _, st := range p.Status() {
		for _, in := range st.Instances {
			if in.State == "ready" {
				out = append(out, in.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// The registrar holds exactly the ready instances: as they start, when one
// crashes and is replaced, across a new revision, after scaling to zero
// and after shutdown.
func TestRegistrarListsTheReadyInstances(t *testing.T) {
	t.Parallel()
	reg := &listing{}
	r := &serverRunner{tag: "v1"}
	spec := ServiceSpec{Name: "s", Runner: r, Template: "a", Registrar: reg, Engine: autoscale.Config{MinInstances: 2, IdleTimeout: time.Second}}
	p, _ := newTestPool(t, spec)
	stop := runPool(t, p)
	same := func(what string) {
		t.Helper()
		eventually(t, 20*time.Second, what, func() bool {
			return slices.Equal(reg.names(), readyNames(p))
		})
	}
	eventually(t, 20*time.Second, "two instances not ready", func() bool { return len(readyNames(p)) == 2 })
	same("the registrar does not list the two ready instances")
	for _, si := range r.all() {
		reg.mu.Lock()
		addr := reg.addrs[si.id]
		reg.mu.Unlock()
		if addr != si.Addr() {
			t.Fatalf("instance %s registered at %q, runs at %q", si.id, addr, si.Addr())
		}
	}

	crashed := r.all()[0].id
	r.all()[0].crash()
	eventually(t, 20*time.Second, "the crashed instance is still listed", func() bool { return !slices.Contains(reg.names(), crashed) })
	eventually(t, 20*time.Second, "no replacement ready", func() bool { return len(readyNames(p)) == 2 })
	same("after a crash the registrar does not list the ready instances")

	// A new revision: its instances replace the old ones in the listing.
	spec.Template, spec.Runner = "b", &serverRunner{tag: "v2"}
	if err := p.Apply([]ServiceSpec{spec}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the new revision's instances are not the ones listed", func() bool {
		names := reg.names()
		return len(names) == 2 && names[0] >= "s-00002" && names[1] >= "s-00002"
	})

	// Scale to zero: the listing empties.
	spec.Engine.MinInstances = 0
	if err := p.Apply([]ServiceSpec{spec}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "idle instances still listed", func() bool { return len(reg.names()) == 0 })

	// Scale from zero by a request, then shut down: nothing stays listed.
	// A long idle timeout now, so that the instance the request starts
	// stays listed until the test sees it, however slow the machine.
	spec.Engine.IdleTimeout = time.Minute
	if err := p.Apply([]ServiceSpec{spec}); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := get(t, p.Handler("s"), "/"); code != 200 {
		t.Fatal(code)
	}
	eventually(t, 20*time.Second, "the instance a request started is not listed", func() bool { return len(reg.names()) == 1 })
	stop()
	if names := reg.names(); len(names) != 0 {
		t.Fatalf("after shutdown the registrar still lists %v", names)
	}
}
