package servicequotas

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/state/bolt"
)

// DefaultPollInterval is how often Run looks for changes other nodes made.
const DefaultPollInterval = 200 * time.Millisecond

// Options configure a Service. The zero value works: the default config,
// state in memory, every request PENDING until an operator decides.
type Options struct {
	// Config is the throttling policy whose categories are the quotas;
	// nil means quota.Default().
	Config *quota.Config
	// Policy decides requests as they are made.
	Policy Policy
	// Redis, when set, keeps requests and approved values in Redis, so
	// that every node sharing it applies them and they survive
	// restarts; nil keeps them in memory.
	Redis redis.UniversalClient
	// Durable, when set and Redis is not, keeps requests, their history,
	// applied values and tags in this embedded store: New loads it, and
	// every change is on disk before its answer. nil means memory alone.
	Durable *bolt.DB
	// CacheRequests bounds the requests a Durable store keeps in memory:
	// an account's are read from the file when it is first used, and the
	// least recently used accounts whose changes are all on disk are
	// dropped beyond it. 0 means DefaultCacheRequests; negative is an
	// error.
	CacheRequests int
	// PollInterval is how often Run checks Redis for changes made on
	// other nodes; 0 means DefaultPollInterval.
	PollInterval time.Duration
	// Now is the clock of request timestamps; nil means time.Now.
	Now func() time.Time
	// Log receives store failures; nil means slog.Default().
	Log *slog.Logger
	// Usage, when set, reports an account's buckets in a region over the
	// last hour, for GetQuotaUtilizationReport; nil answers reports with
	// no quotas.
	Usage func(account, region string) []BucketUse
}

// Service is the Service Quotas API and the source of approved values. It
// is safe for concurrent use.
type Service struct {
	be      backend
	now     func() time.Time
	log     *slog.Logger
	poll    time.Duration
	usage   func(account, region string) []BucketUse
	catalog atomic.Pointer[Catalog]
	policy  atomic.Pointer[Policy]
	applied atomic.Pointer[snapshot]
	// served: the config has a service that answers this API here (its
	// X-Amz-Target prefix, no upstream, no autoscale pool).
	served atomic.Bool
	// migrated is set once the legacy Redis document has been looked
	// for (and moved, if there was one).
	migrated atomic.Bool
}

// snapshot is the applied values as limits, by bucket key without the
// key's string form.
type snapshot struct {
	version int64
	vals    map[string]float64 // by appliedKey
	limits  map[limitKey]bucket.Limit
}

type limitKey struct{ service, account, region, category string }

// New returns a Service. It starts nothing; call Run to follow other
// nodes' changes.
func New(o Options) (*Service, error) {
	if o.CacheRequests < 0 {
		return nil, errors.New("servicequotas: CacheRequests must not be negative")
	}
	cfg := o.Config
	if cfg == nil {
		cfg = quota.Default()
	}
	s := &Service{now: o.Now, log: o.Log, poll: o.PollInterval, usage: o.Usage}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.poll <= 0 {
		s.poll = DefaultPollInterval
	}
	switch {
	case o.Redis != nil:
		s.be = &redisBackend{rdb: o.Redis}
	case o.Durable != nil:
		b, err := newBoltBackend(o.Durable, o.CacheRequests)
		if err != nil {
			return nil, err
		}
		s.be = b
	default:
		s.be = newMemoryBackend()
	}
	if err := s.SetConfig(cfg, o.Policy); err != nil {
		return nil, err
	}
	s.applied.Store(&snapshot{version: -1})
	return s, nil
}

// SetConfig swaps the config and policy, as a reload does. Approved
// values stay: they are in the store, not the file.
func (s *Service) SetConfig(cfg *quota.Config, p Policy) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("servicequotas: policy: %w", err)
	}
	c, err := NewCatalog(cfg)
	if err != nil {
		return err
	}
	s.catalog.Store(c)
	s.policy.Store(&p)
	s.served.Store(slices.ContainsFunc(cfg.Services(), func(svc *quota.Service) bool {
		return svc.TargetPrefix == quota.ServiceQuotasTargetPrefix && svc.Upstream == "" && !svc.Autoscaled
	}))
	if old := s.applied.Load(); old != nil {
		s.applied.Store(buildSnapshot(c, old.version, old.vals))
	}
	return nil
}

// Catalog returns the current catalog.
func (s *Service) Catalog() *Catalog { return s.catalog.Load() }

// Limit returns the limit of bucket k: l (the config's) unless an
// approved change applies to k's account, region and category, whose
// burst and rate then replace l's. It is the gateway's Options.Limits.
func (s *Service) Limit(k quota.Key, l bucket.Limit) bucket.Limit {
	snap := s.applied.Load()
	if len(snap.limits) == 0 {
		return l
	}
	if a, ok := snap.limits[limitKey{k.Service, k.Account, k.Region, k.Category}]; ok {
		return a
	}
	return l
}

// Refresh reads the store now and applies what changed. Run calls it
// every PollInterval; the API calls it after each change it makes. The
// first Refresh that reaches Redis moves a store of an earlier release
// (one JSON document) into the per-request keys.
func (s *Service) Refresh(ctx context.Context) error {
	if err := s.migrateOnce(ctx); err != nil {
		return err
	}
	v, err := s.be.version(ctx)
	if err != nil {
		return err
	}
	if old := s.applied.Load(); old != nil && old.version == v {
		return nil
	}
	v, vals, err := s.be.applied(ctx)
	if err != nil {
		return err
	}
	for {
		old := s.applied.Load()
		if old.version >= v && old.version != -1 {
			return nil
		}
		if s.applied.CompareAndSwap(old, buildSnapshot(s.catalog.Load(), v, vals)) {
			return nil
		}
	}
}

// refreshAfter applies a change this node just made; a failure is logged
// and Run applies the change at its next poll.
func (s *Service) refreshAfter(ctx context.Context) {
	if err := s.Refresh(ctx); err != nil {
		s.log.Warn("service quotas: apply a change just made", "error", err)
	}
}

// Run follows changes made on other nodes until ctx ends; it returns nil
// then. Store failures are logged and retried at the next poll.
func (s *Service) Run(ctx context.Context) error {
	t := time.NewTicker(s.poll)
	defer t.Stop()
	failing := false
	for {
		if err := s.Refresh(ctx); err != nil && ctx.Err() == nil {
			if !failing {
				s.log.Warn("service quotas store unavailable; approved values as last read", "error", err)
			}
			failing = true
		} else {
			failing = false
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// buildSnapshot turns applied values into limits. A value whose quota
// left the config is kept in the store and ignored here.
func buildSnapshot(c *Catalog, version int64, applied map[string]float64) *snapshot {
	snap := &snapshot{version: version, vals: applied, limits: map[limitKey]bucket.Limit{}}
	type pair struct{ burst, rate float64 }
	vals := map[limitKey]*pair{}
	for k, v := range applied {
		account, region, svc, code, ok := splitAppliedKey(k)
		if !ok {
			continue
		}
		q, ok := c.Quota(svc, code)
		if !ok {
			continue
		}
		lk := limitKey{c.configName(svc), account, region, q.Category}
		p := vals[lk]
		if p == nil {
			p = &pair{}
			vals[lk] = p
		}
		if q.Kind == Burst {
			p.burst = v
		} else {
			p.rate = v
		}
	}
	for lk, p := range vals {
		l, ok := c.cfg.Limit(quota.Key{Service: lk.service, Account: lk.account, Region: lk.region, Category: lk.category})
		if !ok {
			continue
		}
		capacity, rate := l.Capacity(), l.RefillPerSecond()
		if p.burst > 0 {
			capacity = int64(p.burst)
		}
		if p.rate > 0 {
			rate = p.rate
		}
		nl, err := bucket.NewLimit(capacity, rate)
		if err != nil {
			continue
		}
		snap.limits[lk] = nl
	}
	return snap
}

func splitAppliedKey(k string) (account, region, svc, code string, ok bool) {
	var parts [4]string
	n := 0
	start := 0
	for i := 0; i < len(k) && n < 3; i++ {
		if k[i] == '|' {
			parts[n] = k[start:i]
			n++
			start = i + 1
		}
	}
	if n != 3 {
		return "", "", "", "", false
	}
	parts[3] = k[start:]
	return parts[0], parts[1], parts[2], parts[3], true
}

// errStore marks a failure of the store, answered as ServiceException.
var errStore = errors.New("service quotas store unavailable")

// CachedRequests is how many increase requests s holds in memory now:
// every one in memory, those of the accounts last used over the
// embedded store (within Options.CacheRequests, an account in use may
// take it past), none over Redis, which is read each time.
func (s *Service) CachedRequests() int {
	var m *memoryBackend
	switch b := s.be.(type) {
	case *memoryBackend:
		m = b
	case *boltBackend:
		m = b.memoryBackend
	default:
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.reqs)
}
