package servicequotas

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/awsjson"
)

// Request statuses, as the model names them (RequestStatus).
const (
	StatusPending      = "PENDING"
	StatusApproved     = "APPROVED"
	StatusDenied       = "DENIED"
	StatusNotApproved  = "NOT_APPROVED"
	StatusCaseClosed   = "CASE_CLOSED"
	StatusInvalid      = "INVALID_REQUEST"
	statusCaseOpened   = "CASE_OPENED"
	maxRequestsStored  = 10000
	maxOpenPerAccount  = 20
	redisKeyPrefix     = "tollgate:servicequotas:"
	redisStateKey      = redisKeyPrefix + "state"
	redisVersionKey    = redisKeyPrefix + "version"
	maxTransactRetries = 50
)

// Request is one quota change request.
type Request struct {
	ID           string  `json:"id"`
	Account      string  `json:"account"`
	Region       string  `json:"region"`
	ServiceCode  string  `json:"service"`
	QuotaCode    string  `json:"quota"`
	DesiredValue float64 `json:"desired"`
	Status       string  `json:"status"`
	Reason       string  `json:"reason,omitempty"` // why it was approved or denied
	Created      int64   `json:"created"`          // Unix milliseconds
	LastUpdated  int64   `json:"updated"`          // Unix milliseconds
}

// appliedKey names one applied value: a quota of one account in one region.
func appliedKey(account, region, serviceCode, quotaCode string) string {
	return account + "|" + region + "|" + serviceCode + "|" + quotaCode
}

// state is everything the API stores: one document, so that one
// transaction changes a request and the value it applies together.
type state struct {
	Version  int64              `json:"version"`
	Requests []Request          `json:"requests"` // oldest first
	Applied  map[string]float64 `json:"applied"`  // appliedKey -> value
}

func (s *state) find(id string) int {
	for i := range s.Requests {
		if s.Requests[i].ID == id {
			return i
		}
	}
	return -1
}

// trim forgets the oldest closed requests beyond maxRequestsStored.
func (s *state) trim() {
	for len(s.Requests) > maxRequestsStored {
		i := 0
		for i < len(s.Requests) && s.Requests[i].Status == StatusPending {
			i++
		}
		if i == len(s.Requests) {
			return
		}
		s.Requests = append(s.Requests[:i], s.Requests[i+1:]...)
	}
}

// backend keeps the state: in memory, or in Redis shared by every node.
type backend interface {
	load(ctx context.Context) (*state, error)
	// update applies f to the current state and stores it with a new
	// version, atomically; f's error aborts and is returned.
	update(ctx context.Context, f func(*state) error) (*state, error)
	// version is the stored state's version, cheap to poll.
	version(ctx context.Context) (int64, error)
}

type memoryBackend struct {
	mu sync.Mutex
	st state
}

func (m *memoryBackend) load(context.Context) (*state, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.clone(), nil
}

func (m *memoryBackend) update(_ context.Context, f func(*state) error) (*state, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.st.clone()
	if err := f(st); err != nil {
		return nil, err
	}
	st.Version++
	st.trim()
	m.st = *st
	return st.clone(), nil
}

func (m *memoryBackend) version(context.Context) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.Version, nil
}

func (s *state) clone() *state {
	c := &state{Version: s.Version, Requests: append([]Request(nil), s.Requests...), Applied: make(map[string]float64, len(s.Applied))}
	for k, v := range s.Applied {
		c.Applied[k] = v
	}
	return c
}

// redisBackend keeps the state as one JSON value with its version beside
// it, changed by optimistic WATCH/MULTI transactions.
type redisBackend struct{ rdb redis.UniversalClient }

func (b *redisBackend) load(ctx context.Context) (*state, error) {
	raw, err := b.rdb.Get(ctx, redisStateKey).Bytes()
	if errors.Is(err, redis.Nil) {
		return &state{Applied: map[string]float64{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("servicequotas: read state: %w", err)
	}
	st := &state{}
	if err := json.Unmarshal(raw, st); err != nil {
		return nil, fmt.Errorf("servicequotas: decode state: %w", err)
	}
	if st.Applied == nil {
		st.Applied = map[string]float64{}
	}
	return st, nil
}

func (b *redisBackend) update(ctx context.Context, f func(*state) error) (*state, error) {
	var out *state
	txf := func(tx *redis.Tx) error {
		raw, err := tx.Get(ctx, redisStateKey).Bytes()
		st := &state{Applied: map[string]float64{}}
		switch {
		case errors.Is(err, redis.Nil):
		case err != nil:
			return err
		default:
			if err := json.Unmarshal(raw, st); err != nil {
				return fmt.Errorf("servicequotas: decode state: %w", err)
			}
			if st.Applied == nil {
				st.Applied = map[string]float64{}
			}
		}
		if err := f(st); err != nil {
			return err
		}
		st.Version++
		st.trim()
		enc, err := json.Marshal(st)
		if err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, redisStateKey, enc, 0)
			p.Set(ctx, redisVersionKey, st.Version, 0)
			return nil
		})
		out = st
		return err
	}
	for range maxTransactRetries {
		err := b.rdb.Watch(ctx, txf, redisStateKey)
		if errors.Is(err, redis.TxFailedErr) {
			continue
		}
		if err != nil {
			var ae *awsjson.Error
			if errors.As(err, &ae) {
				return nil, err
			}
			return nil, fmt.Errorf("servicequotas: update state: %w", err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("servicequotas: update state: %d conflicting writers in a row", maxTransactRetries)
}

func (b *redisBackend) version(ctx context.Context) (int64, error) {
	v, err := b.rdb.Get(ctx, redisVersionKey).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("servicequotas: read version: %w", err)
	}
	return v, nil
}
