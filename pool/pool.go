package pool

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/pool/revision"
	"github.com/tollgate/tollgate/pool/traffic"
)

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
