package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/pool/revision"
	"github.com/tollgate/tollgate/pool/traffic"
)

// Options configure a Pool. The zero value works.
type Options struct {
	// Logger receives the pool's logs; nil discards them.
	Logger *slog.Logger
	// Registry receives the pool's metrics; nil means a new registry that
	// nothing serves.
	Registry prometheus.Registerer
	// RolloutTimeout is the default of ServiceSpec.RolloutTimeout; 0
	// means DefaultRolloutTimeout.
	RolloutTimeout time.Duration
	// DrainTimeout bounds how long a replaced revision may take to finish
	// its requests before its instances are stopped; 0 means 5 min. The
	// revision's request timeout (its requests cannot last longer) and
	// MaxOverMaxGrace bound it too.
	DrainTimeout time.Duration
	// Revisions, when set, keeps each service's revisions and the
	// traffic SetTraffic sets across restarts (see RevisionStore); nil:
	// they live in the process.
	Revisions RevisionStore
}

// ServiceSpec is one autoscaled service as the pool runs it.
type ServiceSpec struct {
	// Name is the service's name (K_SERVICE); required and unique.
	Name string
	// Engine holds the targets and bounds.
	Engine autoscale.Config
	// Runner starts the service's instances; required.
	Runner Runner
	// Template describes what runs (command, arguments, environment,
	// working directory, readiness) in any stable form: a reload with a
	// different Template starts a new revision with the new Runner; with
	// the same one the new Runner is unused and the instances stay.
	Template string
	// StopGrace is the time between SIGTERM and the kill; 0 means
	// DefaultStopGrace.
	StopGrace time.Duration
	// Registrar, when set, is told when each instance is ready and when
	// it stops taking requests. Like Runner, it is kept for a revision: a
	// reload with the same Template keeps the old one.
	Registrar Registrar
	// RequestTimeout bounds one proxied request from its arrival to its
	// last byte, the pending wait included, as Cloud Run's request
	// timeout; it replaces the server's read and write timeouts for the
	// request. 0 means DefaultRequestTimeout; at most MaxRequestTimeout.
	RequestTimeout time.Duration
	// MaxPending bounds the requests waiting for an instance; one more is
	// answered 429 at once, with Retry-After. 0 means DefaultMaxPending.
	MaxPending int
	// Liveness, when set, probes every ready instance and replaces one
	// that fails (see Liveness); nil means no check after readiness. Like
	// Runner, it is kept for a revision: give it a part in Template.
	Liveness *Liveness
	// Traffic splits the service's requests over its running revisions
	// (see traffic.Target); empty means 100 % to the latest ready one. A
	// reload that gives the same Traffic as the last keeps the split set
	// since by SetTraffic.
	Traffic []traffic.Target
	// Sticky, when set, splits by client rather than per request (see
	// traffic.Sticky); the zero value splits per request. A reload applies it at
	// once.
	Sticky traffic.Sticky
	// Bound are revisions run under a given name on their own runner,
	// such as a traffic entry's revision bound to a Kubernetes
	// Deployment (see BoundRevision).
	Bound []BoundRevision
	// RolloutTimeout bounds how long a revision whose share grows (a new
	// revision, or a traffic change) may take to get the instances its
	// share needs: at the timeout traffic moves if at least one is ready,
	// and otherwise stays where it was, as on Cloud Run (the revision has
	// failed). 0 means Options.RolloutTimeout; at most MaxRolloutTimeout.
	RolloutTimeout time.Duration
	// TrafficFixed, when not "", says why only the spec sets the traffic:
	// SetTraffic then refuses with an error wrapping ErrTrafficFixed.
	TrafficFixed string
	// Recipe is what Options.Revisions needs to make this spec again
	// (RevisionStore.RevisionSpec), in its own form; the pool keeps it
	// with each revision and never reads it.
	Recipe []byte
}

// Request bounds (ServiceSpec.RequestTimeout and MaxPending).
const (
	// DefaultRequestTimeout is Cloud Run's default request timeout.
	DefaultRequestTimeout = 300 * time.Second
	// MaxRequestTimeout is Cloud Run's largest request timeout.
	MaxRequestTimeout = time.Hour
	// DefaultMaxPending is the default bound on a service's pending
	// requests: each costs a connection and its buffers (≈ 25 KB
	// measured), so 1,000 keep a node's memory and file descriptors in
	// hand while covering a burst on a service scaling from zero.
	DefaultMaxPending = 1000
	// MaxMaxPending is the largest MaxPending.
	MaxMaxPending = 1_000_000
	// DefaultRolloutTimeout is the default rollout timeout
	// (ServiceSpec.RolloutTimeout).
	DefaultRolloutTimeout = 5 * time.Minute
	// MaxRolloutTimeout is the largest rollout timeout.
	MaxRolloutTimeout = time.Hour
)

// rolloutTimeout is s's rollout timeout; def when it sets none.
func (s ServiceSpec) rolloutTimeout(def time.Duration) time.Duration {
	if s.RolloutTimeout > 0 {
		return s.RolloutTimeout
	}
	return def
}

// limits are s's request bounds with defaults applied.
func (s ServiceSpec) limits() revision.Limits {
	l := revision.Limits{RequestTimeout: s.RequestTimeout, MaxPending: s.MaxPending, StopGrace: s.StopGrace}
	if l.RequestTimeout <= 0 {
		l.RequestTimeout = DefaultRequestTimeout
	}
	if l.MaxPending <= 0 {
		l.MaxPending = DefaultMaxPending
	}
	if l.StopGrace <= 0 {
		l.StopGrace = DefaultStopGrace
	}
	return l
}

// ErrInvalidSpec is wrapped by Apply's errors about a spec; it is
// traffic.ErrInvalidSpec, which the errors about a traffic block wrap.
var ErrInvalidSpec = traffic.ErrInvalidSpec

// Pool runs the instances of autoscaled services. It is safe for
// concurrent use.
type Pool struct {
	log            *slog.Logger
	m              *revision.Metrics
	rolloutTimeout time.Duration
	drainTimeout   time.Duration
	overMaxGrace   time.Duration // MaxOverMaxGrace; shorter in tests
	persist        *persister    // Options.Revisions; nil without

	mu       sync.RWMutex
	services map[string]*service
	ctx      context.Context // set by Run
	wg       sync.WaitGroup  // revision loops and rollouts
}

// service is one named service: its running revisions, its traffic, and
// the spec it was last given. Fields other than cur, route, sticky and
// reqs are guarded by Pool.mu.
type service struct {
	name     string
	cur      atomic.Pointer[rev] // the latest ready revision
	route    atomic.Pointer[traffic.Routing[*rev]]
	sticky   atomic.Pointer[traffic.Sticky] // the client key, or nil: per request
	reqs     atomic.Uint64                  // untagged requests, for routing.pick
	latest   *rev                           // the newest revision: the spec's Template
	revs     []*rev                         // running revisions, oldest first
	old      []*rev                         // retired revisions, listed until they have stopped
	kept     []keptRevision                 // retired revisions a traffic change may run again (kept.go)
	traffic  []traffic.Target
	spec     ServiceSpec
	number   int // the highest revision number made so far
	shiftGen int // traffic changes begun (shift): a pending one moves only if still the last
}

// New returns an empty pool; Apply gives it services and Run runs them.
func New(opts Options) *Pool {
	p := &Pool{
		log:            opts.Logger,
		rolloutTimeout: opts.RolloutTimeout,
		drainTimeout:   opts.DrainTimeout,
		services:       map[string]*service{},
		overMaxGrace:   MaxOverMaxGrace,
		persist:        newPersister(opts.Revisions),
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	if p.rolloutTimeout <= 0 {
		p.rolloutTimeout = DefaultRolloutTimeout
	}
	if p.drainTimeout <= 0 {
		p.drainTimeout = 5 * time.Minute
	}
	p.m = revision.NewMetrics(reg)
	reg.MustRegister(newOverMaxCollector(p))
	return p
}

// Apply makes the pool run exactly specs: new services are added, removed
// ones drained and stopped, and for the others new targets and bounds are
// applied to the running engine without restarting an instance, or, when
// the Template changed, a new revision rolls out. A spec that cannot be
// used fails the whole call, with an error wrapping ErrInvalidSpec or
// autoscale.ErrInvalidConfig, and changes nothing. With
// Options.Revisions it returns once what it changed is kept; a service
// it adds takes the revisions kept of it (see RevisionStore).
func (p *Pool) Apply(specs []ServiceSpec) error {
	err := p.apply(specs)
	if serr := p.endApply(); err == nil {
		err = serr
	}
	return err
}

func (p *Pool) apply(specs []ServiceSpec) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := map[string]bool{}
	for _, s := range specs {
		if s.Name == "" || s.Runner == nil {
			return fmt.Errorf("%w: service %q needs a name and a runner", ErrInvalidSpec, s.Name)
		}
		if seen[s.Name] {
			return fmt.Errorf("%w: service %q given twice", ErrInvalidSpec, s.Name)
		}
		seen[s.Name] = true
		if s.RequestTimeout < 0 || s.RequestTimeout > MaxRequestTimeout || s.MaxPending < 0 || s.MaxPending > MaxMaxPending {
			return fmt.Errorf("%w: service %q: request timeout %v not in [0, %v] or max pending %d not in [0, %d]",
				ErrInvalidSpec, s.Name, s.RequestTimeout, MaxRequestTimeout, s.MaxPending, MaxMaxPending)
		}
		if s.RolloutTimeout < 0 || s.RolloutTimeout > MaxRolloutTimeout {
			return fmt.Errorf("%w: service %q: rollout timeout %v not in [0, %v]", ErrInvalidSpec, s.Name, s.RolloutTimeout, MaxRolloutTimeout)
		}
		if s.Liveness != nil {
			if err := s.Liveness.WithDefaults().Check(); err != nil {
				return fmt.Errorf("%w: service %q: %w", ErrInvalidSpec, s.Name, err)
			}
		}
		if err := s.Engine.Validate(); err != nil {
			return fmt.Errorf("service %s: %w", s.Name, err)
		}
		if err := traffic.Check(s.Name, s.Traffic); err != nil {
			return err
		}
		if err := s.Sticky.Check(s.Name); err != nil {
			return err
		}
		if err := checkBoundSpec(s); err != nil {
			return err
		}
		svc := p.services[s.Name]
		if svc == nil {
			var err error
			if svc, err = p.newService(s); err != nil {
				return err
			}
		}
		next := ""
		if svc.latest == nil {
			next = p.firstName(svc, s)
		} else if s.Template != svc.spec.Template {
			next = svc.nextName(s)
		}
		if err := svc.checkBound(s, next); err != nil {
			return err
		}
		if err := svc.checkNames(s.Traffic, next, boundNames(s)); err != nil {
			return err
		}
	}
	for name, svc := range p.services {
		if !seen[name] {
			delete(p.services, name)
			for _, rv := range svc.revs {
				rv.Retire(p.drainBound(rv, time.Now()))
			}
			p.log.Info("service removed; draining its instances", "service", name)
		}
	}
	for _, s := range specs {
		svc, ok := p.services[s.Name]
		if !ok {
			svc, err := p.newService(s)
			if err != nil {
				return err
			}
			svc.spec, svc.traffic = s, s.Traffic
			svc.sticky.Store(stickyOf(s.Sticky))
			rv, err := p.newRevision(svc, s, s.Engine, p.firstName(svc, s))
			if err != nil {
				return err
			}
			svc.cur.Store(rv)
			svc.latest, svc.revs = rv, []*rev{rv}
			if err := p.addBound(svc, s); err != nil {
				return err
			}
			if err := p.restoreTraffic(svc, s); err != nil {
				return err
			}
			p.services[s.Name] = svc
			p.reroute(svc)
			p.start(rv)
			continue
		}
		if err := p.addBound(svc, s); err != nil {
			return err
		}
		if err := p.revive(svc, s.Traffic); err != nil {
			return err
		}
		old := svc.spec
		svc.spec = s
		svc.sticky.Store(stickyOf(s.Sticky))
		moved := !slices.Equal(s.Traffic, old.Traffic)
		if moved {
			p.dropSetTraffic(s.Name)
		}
		if s.Template == old.Template {
			if err := svc.latest.SetConfig(s.Engine, s.limits()); err != nil {
				return err
			}
			if moved {
				p.shift(svc, s.Traffic, "reload")
			} else {
				p.reroute(svc)
			}
			continue
		}
		prev := svc.traffic
		if moved {
			// A pending change gives way to the new revision's traffic.
			svc.shiftGen++
			for _, rv := range svc.revs {
				rv.SetFloor(0)
			}
			svc.traffic = s.Traffic
		}
		if err := p.rollout(svc, s, prev); err != nil {
			return err
		}
	}
	return nil
}

// Run drives every service until ctx ends, then stops every instance and
// returns once all have exited. It may be called once.
func (p *Pool) Run(ctx context.Context) error {
	p.mu.Lock()
	if p.ctx != nil {
		p.mu.Unlock()
		return errors.New("pool: Run called twice")
	}
	p.ctx = ctx
	for _, svc := range p.services {
		for _, rv := range svc.revs {
			p.start(rv)
		}
	}
	p.mu.Unlock()
	<-ctx.Done()
	p.wg.Wait()
	return nil
}

// Handler serves the requests of service name: a request naming a tag
// (traffic.TagHeader, or a Host TAG---...) goes to the revision with that tag, or
// gets 404 when none has it; the others are split over the revisions by
// their percents, per client when the service is sticky and the request
// has its client key, else per request. A service the pool does not run
// answers 503.
func (p *Pool) Handler(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.RLock()
		svc := p.services[name]
		p.mu.RUnlock()
		if svc == nil {
			http.Error(w, "service "+name+" has no instance pool", http.StatusServiceUnavailable)
			return
		}
		rt := svc.route.Load()
		if tag := traffic.RequestTag(r); tag != "" {
			rv, ok := rt.Tagged(tag)
			if !ok || rv == nil {
				http.Error(w, "service "+name+" has no revision tagged "+strconv.Quote(tag), http.StatusNotFound)
				return
			}
			rv.ServeHTTP(w, r)
			return
		}
		if st := svc.sticky.Load(); st != nil {
			if key, ok := st.Key(r); ok {
				rt.PickKey(key).ServeHTTP(w, r)
				return
			}
		}
		rt.Pick(svc.reqs.Add(1)).ServeHTTP(w, r)
	})
}

// Services returns the names of the services the pool runs, sorted.
func (p *Pool) Services() []string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	names := make([]string, 0, len(p.services))
	for n := range p.services {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
