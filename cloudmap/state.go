package cloudmap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// state is the registry of one account and region. Every change bumps Seq;
// a service's Revision is the Seq of its last change, so revisions only grow,
// across nodes too (a Redis update is one transaction on the whole state).
type state struct {
	Seq        int64                 `json:"seq"`
	Namespaces map[string]*namespace `json:"namespaces,omitempty"` // by id
	Services   map[string]*service   `json:"services,omitempty"`   // by id
	Ops        map[string]*operation `json:"ops,omitempty"`        // by id
	OpOrder    []string              `json:"op_order,omitempty"`   // oldest first
}

type namespace struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Type        string `json:"type"` // HTTP or DNS_PRIVATE
	Description string `json:"description,omitempty"`
	RequestID   string `json:"creator_request_id,omitempty"`
	OpID        string `json:"op_id"`
	Vpc         string `json:"vpc,omitempty"`
	SOATTL      *int64 `json:"soa_ttl,omitempty"`
	Created     int64  `json:"created"` // Unix milliseconds
}

type service struct {
	ID          string               `json:"id"`
	Name        string               `json:"name"`
	NamespaceID string               `json:"namespace_id"`
	Type        string               `json:"type"` // HTTP or DNS_HTTP
	Description string               `json:"description,omitempty"`
	RequestID   string               `json:"creator_request_id,omitempty"`
	DNS         *dnsConfig           `json:"dns,omitempty"`
	Custom      *int32               `json:"custom_failure_threshold,omitempty"`
	HasCustom   bool                 `json:"custom_health,omitempty"`
	Created     int64                `json:"created"`
	Revision    int64                `json:"revision"`
	Instances   map[string]*instance `json:"instances,omitempty"` // by id
}

type instance struct {
	ID        string            `json:"id"`
	Attrs     map[string]string `json:"attrs,omitempty"`
	RequestID string            `json:"creator_request_id,omitempty"`
	OpID      string            `json:"op_id"`
	Unhealthy bool              `json:"unhealthy,omitempty"` // custom health status
}

type operation struct {
	ID      string            `json:"id"`
	Type    string            `json:"type"`
	Targets map[string]string `json:"targets"`
	Created int64             `json:"created"`
}

func (s *state) init() {
	if s.Namespaces == nil {
		s.Namespaces = map[string]*namespace{}
	}
	if s.Services == nil {
		s.Services = map[string]*service{}
	}
	if s.Ops == nil {
		s.Ops = map[string]*operation{}
	}
	for _, sv := range s.Services {
		if sv.Instances == nil {
			sv.Instances = map[string]*instance{}
		}
	}
}

// instanceCount is the number of instances in a namespace.
func (s *state) instanceCount(nsID string) int {
	n := 0
	for _, sv := range s.Services {
		if sv.NamespaceID == nsID {
			n += len(sv.Instances)
		}
	}
	return n
}

// errStoreConflict: a Redis update lost the race for its scope too often.
var errStoreConflict = errors.New("cloudmap: too many concurrent updates of one registry")

// store keeps the state of every scope. update runs fn on a scope's state
// with every other update of that scope excluded, and keeps what fn changed
// only if it returns nil; fn must check before it changes anything, since
// the memory store does not roll back. view runs fn on a state it must not
// change.
type store interface {
	update(ctx context.Context, scope string, fn func(*state) error) error
	view(ctx context.Context, scope string, fn func(*state) error) error
}

// memStore holds every scope in memory, under one lock.
type memStore struct {
	mu        sync.RWMutex
	scopes    map[string]*state
	maxScopes int
}

func (m *memStore) update(_ context.Context, scope string, fn func(*state) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.scopes[scope]
	if !ok {
		s = &state{}
		s.init()
	}
	if err := fn(s); err != nil {
		return err
	}
	if !ok && s.Seq > 0 {
		// Only a change that creates (a namespace) reaches here with a
		// new scope; every operation that can create knows this code.
		if len(m.scopes) >= m.maxScopes {
			return &apiError{Code: codeResourceLimitExceeded,
				Message: fmt.Sprintf("this registry holds at most %d account/region scopes", m.maxScopes)}
		}
		m.scopes[scope] = s
	}
	return nil
}

func (m *memStore) view(_ context.Context, scope string, fn func(*state) error) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	s, ok := m.scopes[scope]
	if !ok {
		s = &state{}
		s.init()
	}
	return fn(s)
}

// redisStore keeps each scope's state as one JSON value in Redis, updated
// with WATCH/MULTI so that concurrent updates from several nodes serialize,
// with the state's Seq beside it. A view reads the Seq first and decodes
// the state only when it changed since this node last did: reads cost one
// small GET while the registry is unchanged.
type redisStore struct {
	client goredis.UniversalClient
	prefix string

	mu       sync.Mutex
	cache    map[string]*state // by key; read-only once cached
	maxCache int
}

// maxUpdateAttempts bounds the optimistic retries of one Redis update.
const maxUpdateAttempts = 100

// key is where a scope's state lives: the scope is the key's hash tag, so
// the state and its Seq (seqKey) share a Redis Cluster slot.
func (r *redisStore) key(scope string) string {
	return r.prefix + "{" + braces.Replace(scope) + "}"
}

var braces = strings.NewReplacer("{", "%7B", "}", "%7D")

// seqKey holds the Seq of the state at key.
func seqKey(key string) string { return key + ":seq" }

func (r *redisStore) load(ctx context.Context, get func(context.Context, string) *goredis.StringCmd, key string) (*state, error) {
	s := &state{}
	b, err := get(ctx, key).Bytes()
	switch {
	case errors.Is(err, goredis.Nil):
	case err != nil:
		return nil, fmt.Errorf("cloudmap: redis GET %s: %w", key, err)
	default:
		if err := json.Unmarshal(b, s); err != nil {
			return nil, fmt.Errorf("cloudmap: redis value %s: %w", key, err)
		}
	}
	s.init()
	return s, nil
}

func (r *redisStore) update(ctx context.Context, scope string, fn func(*state) error) error {
	key := r.key(scope)
	for range maxUpdateAttempts {
		err := r.client.Watch(ctx, func(tx *goredis.Tx) error {
			s, err := r.load(ctx, tx.Get, key)
			if err != nil {
				return err
			}
			seq := s.Seq
			if err := fn(s); err != nil {
				return err
			}
			if s.Seq == seq {
				return nil // nothing changed
			}
			b, err := json.Marshal(s)
			if err != nil {
				return fmt.Errorf("cloudmap: encode state: %w", err)
			}
			_, err = tx.TxPipelined(ctx, func(p goredis.Pipeliner) error {
				p.Set(ctx, key, b, 0)
				p.Set(ctx, seqKey(key), s.Seq, 0)
				return nil
			})
			return err
		}, key)
		if errors.Is(err, goredis.TxFailedErr) {
			continue
		}
		return err
	}
	return errStoreConflict
}

func (r *redisStore) view(ctx context.Context, scope string, fn func(*state) error) error {
	key := r.key(scope)
	seq, err := r.client.Get(ctx, seqKey(key)).Int64()
	if err != nil && !errors.Is(err, goredis.Nil) {
		return fmt.Errorf("cloudmap: redis GET %s: %w", seqKey(key), err)
	}
	r.mu.Lock()
	s, ok := r.cache[key]
	r.mu.Unlock()
	if !ok || s.Seq != seq {
		if s, err = r.load(ctx, r.client.Get, key); err != nil {
			return err
		}
		r.mu.Lock()
		if len(r.cache) >= r.maxCache {
			for k := range r.cache { // forget any one
				delete(r.cache, k)
				break
			}
		}
		r.cache[key] = s
		r.mu.Unlock()
	}
	return fn(s)
}

// cloneAttrs copies an attribute map (nil stays nil).
func cloneAttrs(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	return maps.Clone(m)
}
