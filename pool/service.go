package pool

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/pool/revision"
	"github.com/tollgate/tollgate/pool/traffic"
)

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

// rev is one revision of a service as the pool holds it: the running
// revision (package revision), and what the pool knows of it beyond what
// runs. The fields are guarded by Pool.mu.
type rev struct {
	*revision.Revision
	spec      ServiceSpec // what it was made from, to make it again (keptRevision)
	created   time.Time   // when it was first made (keptRevision)
	where     string      // what its runner runs, when bound (BoundRevision.Where); else ""
	deploying bool        // its rollout waits for its first instances (rollout)
	failed    string      // why its last rollout failed (no instance ready in time); "" if none did
}

// keptRevision is a retired revision as the service keeps it: what it
// takes to run it again.
type keptRevision struct {
	name    string
	spec    ServiceSpec // its runner, config and limits as it last ran
	where   string      // BoundRevision.Where, if bound
	created time.Time   // when it was first made
	retired time.Time   // when it last stopped taking traffic
	recipe  []byte      // kept before a restart: spec is made from it when it runs again (persist.go)
}

// revisionName is the name of a service's n-th revision, as Knative
// names them: hello-00001.
func revisionName(service string, n int) string {
	return fmt.Sprintf("%s-%05d", service, n)
}

// revisionNumber is the number of a revision named as revisionName names
// them, or 0 for another name.
func revisionNumber(service, name string) int {
	digits, ok := strings.CutPrefix(name, service+"-")
	if !ok || len(digits) < 5 {
		return 0
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 1 || revisionName(service, n) != name {
		return 0
	}
	return n
}

// revisionByName is svc's running revision name, or nil; p.mu is held.
func (svc *service) revisionByName(name string) *rev {
	for _, rv := range svc.revs {
		if rv.Name() == name {
			return rv
		}
	}
	return nil
}

// keptByName is svc's kept revision name, or nil; p.mu is held.
func (svc *service) keptByName(name string) *keptRevision {
	for i := range svc.kept {
		if svc.kept[i].name == name {
			return &svc.kept[i]
		}
	}
	return nil
}

// pruneOld forgets the retired revisions that have stopped; p.mu is held.
func (svc *service) pruneOld() {
	svc.old = slices.DeleteFunc(svc.old, func(rv *rev) bool {
		select {
		case <-rv.Done():
			return true
		default:
			return false
		}
	})
}

// sortRevisions orders svc.revs by number, oldest first, as every
// replica orders them (sticky slots are laid in this order); p.mu is
// held.
func sortRevisions(svc *service) {
	slices.SortStableFunc(svc.revs, func(a, b *rev) int {
		return revisionNumber(svc.name, a.Name()) - revisionNumber(svc.name, b.Name())
	})
}

// orRunner is where, or "another runner" when it is not known.
func orRunner(where string) string {
	if where == "" {
		return "another runner"
	}
	return where
}

// persister is the pool's side of its RevisionStore. Its maps are
// guarded by Pool.mu; saveMu orders the saves, so that a later one
// never writes an older state.
type persister struct {
	store  RevisionStore
	saveMu sync.Mutex
	loaded map[string]*SavedRevisions // read during the current Apply
	put    map[string]putTraffic      // traffic set by SetTraffic, by service
	last   map[string]SavedRevisions  // the state last saved, by service
}

// putTraffic is a block SetTraffic set, and the spec's traffic then.
type putTraffic struct{ traffic, spec []traffic.Target }

func newPersister(s RevisionStore) *persister {
	if s == nil {
		return nil
	}
	return &persister{store: s, loaded: map[string]*SavedRevisions{}, put: map[string]putTraffic{}, last: map[string]SavedRevisions{}}
}
