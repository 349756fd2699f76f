package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/autoscale"
)

// Options configure a Pool. The zero value works.
type Options struct {
	// Logger receives the pool's logs; nil discards them.
	Logger *slog.Logger
	// Registry receives the pool's metrics; nil means a new registry that
	// nothing serves.
	Registry prometheus.Registerer
	// RolloutTimeout bounds how long a new revision may take to get its
	// instances ready before traffic moves to it anyway; 0 means 5 min.
	RolloutTimeout time.Duration
	// DrainTimeout bounds how long a replaced revision may take to finish
	// its requests before its instances are stopped; 0 means 5 min.
	DrainTimeout time.Duration
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
)

// limits are a spec's request bounds with defaults applied.
type limits struct {
	requestTimeout time.Duration
	maxPending     int
	grace          time.Duration
}

func (s ServiceSpec) limits() limits {
	l := limits{requestTimeout: s.RequestTimeout, maxPending: s.MaxPending, grace: s.StopGrace}
	if l.requestTimeout <= 0 {
		l.requestTimeout = DefaultRequestTimeout
	}
	if l.maxPending <= 0 {
		l.maxPending = DefaultMaxPending
	}
	if l.grace <= 0 {
		l.grace = DefaultStopGrace
	}
	return l
}

// ErrInvalidSpec is wrapped by Apply's errors about a spec.
var ErrInvalidSpec = errors.New("pool: invalid service spec")

// Pool runs the instances of autoscaled services. It is safe for
// concurrent use.
type Pool struct {
	log            *slog.Logger
	m              *metrics
	rolloutTimeout time.Duration
	drainTimeout   time.Duration

	mu       sync.RWMutex
	services map[string]*service
	ctx      context.Context // set by Run
	wg       sync.WaitGroup  // revision loops and rollouts
}

// service is one named service: its current revision, and the spec it
// was last given.
type service struct {
	name   string
	m      *serviceMetrics
	cur    atomic.Pointer[revision]
	old    []*revision // replaced revisions, listed until they have stopped; guarded by Pool.mu
	spec   ServiceSpec
	number int // revisions made so far
}

// New returns an empty pool; Apply gives it services and Run runs them.
func New(opts Options) *Pool {
	p := &Pool{
		log:            opts.Logger,
		rolloutTimeout: opts.RolloutTimeout,
		drainTimeout:   opts.DrainTimeout,
		services:       map[string]*service{},
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	if p.rolloutTimeout <= 0 {
		p.rolloutTimeout = 5 * time.Minute
	}
	if p.drainTimeout <= 0 {
		p.drainTimeout = 5 * time.Minute
	}
	p.m = newMetrics(reg)
	return p
}

// Apply makes the pool run exactly specs: new services are added, removed
// ones drained and stopped, and for the others new targets and bounds are
// applied to the running engine without restarting an instance, or, when
// the Template changed, a new revision rolls out. A spec that cannot be
// used fails the whole call, with an error wrapping ErrInvalidSpec or
// autoscale.ErrInvalidConfig, and changes nothing.
func (p *Pool) Apply(specs []ServiceSpec) error {
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
		if err := s.Engine.Validate(); err != nil {
			return fmt.Errorf("service %s: %w", s.Name, err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, svc := range p.services {
		if !seen[name] {
			delete(p.services, name)
			rv := svc.cur.Load()
			rv.retire(time.Now().Add(p.drainTimeout))
			p.log.Info("service removed; draining its instances", "service", name)
			if p.ctx != nil {
				// Its series go once its instances have stopped (or at
				// shutdown), unless it came back meanwhile.
				ctx := p.ctx
				p.wg.Add(1)
				go func() {
					defer p.wg.Done()
					select {
					case <-rv.finished:
					case <-ctx.Done():
						return
					}
					p.mu.RLock()
					_, back := p.services[name]
					p.mu.RUnlock()
					if !back {
						svc.m.remove()
					}
				}()
			}
		}
	}
	for _, s := range specs {
		svc, ok := p.services[s.Name]
		if !ok {
			svc = &service{name: s.Name, m: p.m.service(s.Name), spec: s}
			rv, err := p.newRevision(svc, s, s.Engine)
			if err != nil {
				return err
			}
			svc.cur.Store(rv)
			p.services[s.Name] = svc
			p.start(rv)
			continue
		}
		old := svc.spec
		svc.spec = s
		if s.Template == old.Template {
			rv := svc.cur.Load()
			if err := rv.setConfig(s.Engine, s.limits()); err != nil {
				return err
			}
			continue
		}
		if err := p.rollout(svc, s); err != nil {
			return err
		}
	}
	return nil
}

func (p *Pool) newRevision(svc *service, s ServiceSpec, cfg autoscale.Config) (*revision, error) {
	svc.number++
	name := fmt.Sprintf("%s-%05d", svc.name, svc.number)
	rv, err := newRevision(svc.name, name, cfg, s.Runner, s.limits(), p.log, svc.m)
	if err == nil {
		rv.reg = s.Registrar
	}
	return rv, err
}

// start runs a revision's loop under Run, once Run has begun; p.mu is held.
func (p *Pool) start(rv *revision) {
	if p.ctx == nil || p.ctx.Err() != nil {
		return
	}
	ctx := p.ctx
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		rv.run(ctx)
	}()
}

// rollout starts a new revision for svc with as many instances as the
// current one has ready, moves traffic to it once they are ready (or after
// RolloutTimeout), then drains the old revision; p.mu is held.
func (p *Pool) rollout(svc *service, s ServiceSpec) error {
	old := svc.cur.Load()
	warm := old.readyCount()
	cfg := s.Engine
	boot := cfg
	boot.MinInstances = max(cfg.MinInstances, min(warm, maxInstances(cfg)))
	rv, err := p.newRevision(svc, s, boot)
	if err != nil {
		return err
	}
	if p.ctx == nil { // not running yet: nothing to warm up
		svc.cur.Store(rv)
		old.retire(time.Now())
		return nil
	}
	p.log.Info("new revision: starting instances before moving traffic", "service", svc.name, "revision", rv.name, "instances", boot.MinInstances, "previous", old.name)
	p.start(rv)
	ctx := p.ctx
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		deadline := time.Now().Add(p.rolloutTimeout)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for rv.readyCount() < boot.MinInstances && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
		p.mu.Lock()
		current := p.services[svc.name] == svc && svc.cur.Load() == old
		if current {
			svc.cur.Store(rv)
		}
		p.mu.Unlock()
		if !current { // replaced again meanwhile, or removed
			rv.retire(time.Now())
			return
		}
		// The new revision decides from the load it takes over, not from
		// windows that saw none (its count fell to 1 once its boot
		// minimum was lifted, then climbed back).
		now := time.Now()
		old.mu.Lock()
		hist := old.eng.History(now)
		old.mu.Unlock()
		rv.mu.Lock()
		rv.eng.Seed(now, hist)
		rv.mu.Unlock()
		p.mu.Lock()
		svc.old = append(svc.old, old)
		p.mu.Unlock()
		p.log.Info("traffic moved to the new revision; draining the previous one", "service", svc.name, "revision", rv.name, "ready", rv.readyCount(), "previous", old.name)
		old.retire(time.Now().Add(p.drainTimeout))
		if err := rv.setConfig(cfg, s.limits()); err != nil {
			p.log.Error("new revision refused its config", "service", svc.name, "error", err)
		}
	}()
	return nil
}

func maxInstances(c autoscale.Config) int {
	if c.MaxInstances == 0 {
		return autoscale.DefaultMaxInstances
	}
	return c.MaxInstances
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
		p.start(svc.cur.Load())
	}
	p.mu.Unlock()
	<-ctx.Done()
	p.wg.Wait()
	return nil
}

// Handler serves the requests of service name, whatever its current
// revision; a service the pool does not run answers 503.
func (p *Pool) Handler(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.RLock()
		svc := p.services[name]
		p.mu.RUnlock()
		if svc == nil {
			http.Error(w, "service "+name+" has no instance pool", http.StatusServiceUnavailable)
			return
		}
		svc.cur.Load().ServeHTTP(w, r)
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
