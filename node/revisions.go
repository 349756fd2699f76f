package node

import (
	"encoding/json"
	"fmt"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/state"
	"github.com/tollgate/tollgate/state/bolt"
)

// revisionStore keeps the pool's revisions (pool.RevisionStore) in the
// embedded durable store: one record a service in table
// state.RevisionsTable, its key the service's name, its value the JSON of
// pool.SavedRevisions, whose recipes are the JSON of the autoscale
// section each revision was made from (recipeOf).
type revisionStore struct {
	db    *bolt.DB
	pools pools
}

// LoadRevisions reads service's record.
func (s revisionStore) LoadRevisions(service string) (pool.SavedRevisions, bool, error) {
	var sv pool.SavedRevisions
	found := false
	err := s.db.Read(func(r *bolt.Reader) error {
		v := r.Get(state.RevisionsTable, service)
		if v == nil {
			return nil
		}
		found = true
		return json.Unmarshal(v, &sv)
	})
	if err != nil {
		return pool.SavedRevisions{}, false, fmt.Errorf("%s: table %s key %s is unreadable (%w); restore the file from a backup (tollgate state import) or move it away to start empty",
			s.db.Path(), state.RevisionsTable, service, err)
	}
	return sv, found, nil
}

// SaveRevisions writes the records in one transaction and returns once it
// is on disk.
func (s revisionStore) SaveRevisions(all []pool.SavedRevisions) error {
	values := make([][]byte, len(all))
	for i, sv := range all {
		b, err := json.Marshal(sv)
		if err != nil {
			return fmt.Errorf("service %s: %w", sv.Service, err)
		}
		values[i] = b
	}
	return s.db.Write(func(w *bolt.Writer) error {
		for i, sv := range all {
			if err := w.Put(state.RevisionsTable, sv.Service, values[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

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
