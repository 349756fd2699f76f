package servicequotas

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/awsjson"
)

// The store of releases before issue 28: every request and applied value
// in one JSON document, rewritten whole on every write.
const (
	legacyStateKey  = "tollgate:servicequotas:state"
	legacyBackupKey = "tollgate:servicequotas:state:migrated"
)

type legacyState struct {
	Requests []Request          `json:"requests"`
	Applied  map[string]float64 `json:"applied"`
}

// migrate moves the legacy document, if Redis holds one, into the
// per-request keys, once: GETDEL hands it to one node only, which keeps
// a copy under legacyBackupKey first. Its requests keep their ids, times,
// statuses and reasons (within the bounds, newest kept); its applied
// values are set as they were. It returns how many requests it moved.
func (b *redisBackend) migrate(ctx context.Context) (int, error) {
	raw, err := b.rdb.GetDel(ctx, legacyStateKey).Bytes()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, storeErr("read the legacy state", err)
	}
	if err := b.rdb.Set(ctx, legacyBackupKey, raw, 0).Err(); err != nil {
		return 0, storeErr("keep the legacy state", err)
	}
	var st legacyState
	if err := json.Unmarshal(raw, &st); err != nil {
		return 0, storeErr("decode the legacy state", err)
	}
	sort.SliceStable(st.Requests, func(i, j int) bool { return st.Requests[i].Created < st.Requests[j].Created })
	n := 0
	for _, r := range st.Requests {
		err := b.insert(ctx, r)
		var refused *awsjson.Error
		if errors.As(err, &refused) {
			continue // beyond a bound now: the request is not kept
		}
		if err != nil {
			return n, err
		}
		n++
	}
	for k, v := range st.Applied {
		if err := b.set(ctx, k, v); err != nil {
			return n, err
		}
	}
	return n, nil
}

// insert stores a request as it was, its value not applied again.
func (b *redisBackend) insert(ctx context.Context, r Request) error {
	vals, err := b.values(ctx, []string{r.applied()})
	if err != nil {
		return err
	}
	v, set := vals[r.applied()]
	applied := r.Status == StatusApproved
	if applied {
		r.Status = StatusDenied // closed without applying; set below
	}
	if err := b.create(ctx, r, expect{value: v, set: set}); err != nil {
		return err
	}
	if applied || r.LastUpdated != r.Created {
		status := r.Status
		if applied {
			status = StatusApproved
		}
		return b.rdb.HSet(ctx, redisPrefix+"req:"+r.ID, "status", status, "updated", r.LastUpdated).Err()
	}
	return nil
}

// migrateOnce runs the backend's migration at the first Refresh that
// reaches the store while the config serves the Service Quotas API: a
// node whose config does not leaves the legacy document, and its log,
// to one that does.
func (s *Service) migrateOnce(ctx context.Context) error {
	m, ok := s.be.(*redisBackend)
	if !ok || s.migrated.Load() || !s.served.Load() {
		return nil
	}
	n, err := m.migrate(ctx)
	if err != nil {
		return fmt.Errorf("servicequotas: migrate the legacy state: %w", err)
	}
	s.migrated.Store(true)
	if n > 0 {
		s.log.Info("service quotas: moved the legacy state document into per-request keys", "requests", n, "backup", legacyBackupKey)
	}
	return nil
}
