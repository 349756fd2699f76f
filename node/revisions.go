package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/state"
	"github.com/tollgate/tollgate/state/bolt"
	"github.com/tollgate/tollgate/state/transfer"
)

// revisionStore keeps the pool's revisions (pool.RevisionStore) in
// records: one a service, its key the service's name, its value the JSON
// of pool.SavedRevisions, whose recipes are the JSON of the autoscale
// section each revision was made from (recipeOf).
type revisionStore struct {
	records revisionRecords
	pools   pools
}

// revisionRecords hold the revisions table (state.RevisionsTable): the
// embedded durable store (boltRevisions) or, for nodes sharing Redis,
// Redis (redisRevisions), in the schema an export carries.
type revisionRecords interface {
	// get returns service's record, nil when there is none; an error
	// when the store could not be read, wrapping errNotRecords when it
	// answered with something that is not the table.
	get(service string) ([]byte, error)
	// put writes the records (values by key) at once, durably as the
	// store is durable, before it returns.
	put(keys []string, values [][]byte) error
	// where names the store in messages.
	where() string
}

// errNotRecords is a store's answer that is not the revisions table (in
// Redis, another type than a hash under its key): what is kept is
// damaged, not out of reach.
var errNotRecords = errors.New("the store holds something else than the revisions there")

// LoadRevisions reads service's record. Its errors say which of two
// things happened: the record is kept but damaged (its bytes are not a
// record), and is to be restored or moved away; or the store could not
// be read (Redis unreachable or not answering in time, the data file
// closed), and what it keeps is likely whole: the start waits for it,
// since starting without the kept revisions would rename them.
func (s revisionStore) LoadRevisions(service string) (pool.SavedRevisions, bool, error) {
	var sv pool.SavedRevisions
	v, err := s.records.get(service)
	if err != nil && !errors.Is(err, errNotRecords) {
		return pool.SavedRevisions{}, false, fmt.Errorf("%s: table %s key %s could not be read (%w); tollgate does not start the service without its kept revisions, since starting without them would rename them: start again once the store can be read",
			s.records.where(), state.RevisionsTable, service, err)
	}
	if err == nil && v != nil {
		err = json.Unmarshal(v, &sv)
	}
	if err != nil {
		return pool.SavedRevisions{}, false, fmt.Errorf("%s: table %s key %s is unreadable (%w); restore it from a backup (tollgate state import) or move it away to start empty",
			s.records.where(), state.RevisionsTable, service, err)
	}
	return sv, v != nil, nil
}

// SaveRevisions writes the records at once and returns once they are
// kept.
func (s revisionStore) SaveRevisions(all []pool.SavedRevisions) error {
	keys := make([]string, len(all))
	values := make([][]byte, len(all))
	for i, sv := range all {
		b, err := json.Marshal(sv)
		if err != nil {
			return fmt.Errorf("service %s: %w", sv.Service, err)
		}
		keys[i], values[i] = sv.Service, b
	}
	return s.records.put(keys, values)
}

// boltRevisions is the revisions table in the embedded durable store: a
// put returns once its transaction is on disk.
type boltRevisions struct{ db *bolt.DB }

func (b boltRevisions) get(service string) ([]byte, error) {
	var v []byte
	err := b.db.Read(func(r *bolt.Reader) error {
		v = slices.Clone(r.Get(state.RevisionsTable, service))
		return nil
	})
	return v, err
}

func (b boltRevisions) put(keys []string, values [][]byte) error {
	return b.db.Write(func(w *bolt.Writer) error {
		for i, k := range keys {
			if err := w.Put(state.RevisionsTable, k, values[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

func (b boltRevisions) where() string { return b.db.Path() }

// revisionsTimeout bounds a read or write of the revisions in Redis: a
// start or an admin traffic PUT waits at most this long (the PUT then
// answers that its traffic was not kept).
const revisionsTimeout = 5 * time.Second

// redisRevisions is the revisions table in Redis, the hash an export
// through Redis reads (transfer.RedisRevisionsKey): nodes sharing Redis
// keep their revision names and the admin traffic across restarts as
// long as Redis keeps them (its persistence, reported at start and on
// /readyz).
type redisRevisions struct {
	client  goredis.UniversalClient
	timeout time.Duration
}

func (r redisRevisions) get(service string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	v, err := r.client.HGet(ctx, transfer.RedisRevisionsKey, service).Bytes()
	switch {
	case err == nil:
		return v, nil
	case errors.Is(err, goredis.Nil):
		return nil, nil
	case goredis.HasErrorPrefix(err, "WRONGTYPE"):
		return nil, fmt.Errorf("%w: %w", errNotRecords, err)
	case isTimeout(err):
		return nil, fmt.Errorf("no answer within %v: %w", r.timeout, err)
	}
	return nil, err
}

// isTimeout reports whether err is a deadline passing: the context's,
// or the connection's the client set from it.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (r redisRevisions) put(keys []string, values [][]byte) error {
	if len(keys) == 0 {
		return nil
	}
	fields := make([]any, 0, 2*len(keys))
	for i, k := range keys {
		fields = append(fields, k, values[i])
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	return r.client.HSet(ctx, transfer.RedisRevisionsKey, fields...).Err()
}

func (r redisRevisions) where() string { return "Redis hash " + transfer.RedisRevisionsKey }

// RevisionSpec makes the spec of the autoscale section recipe holds, with
// a runner for its command: a revision kept from before a restart, run
// again.
func (s revisionStore) RevisionSpec(service string, recipe []byte) (pool.ServiceSpec, error) {
	var a config.Autoscale
	if err := json.Unmarshal(recipe, &a); err != nil {
		return pool.ServiceSpec{}, fmt.Errorf("its kept spec is unreadable: %w", err)
	}
	if len(a.Command) == 0 && a.Kubernetes == nil {
		return pool.ServiceSpec{}, fmt.Errorf("its kept spec has neither a command nor a Deployment")
	}
	return s.pools.spec(service, &a)
}

// recipeOf is a revision's recipe (pool.ServiceSpec.Recipe): the JSON of
// its autoscale section without what a revision does not own (the
// traffic and the sticky split).
func recipeOf(a *config.Autoscale) ([]byte, error) {
	c := *a
	c.Traffic, c.Sticky = nil, nil
	b, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("keeping its spec: %w", err)
	}
	return b, nil
}
