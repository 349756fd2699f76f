package pool

import (
	"log/slog"
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
	DefaultRequestTimeout = revision.DefaultRequestTimeout
	// MaxRequestTimeout is Cloud Run's largest request timeout.
	MaxRequestTimeout = time.Hour
	// DefaultMaxPending is the default bound on a service's pending
	// requests (revision.DefaultMaxPending).
	DefaultMaxPending = revision.DefaultMaxPending
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
	return revision.Limits{RequestTimeout: s.RequestTimeout, MaxPending: s.MaxPending, StopGrace: s.StopGrace}.WithDefaults()
}

// ErrInvalidSpec is wrapped by Apply's errors about a spec; it is
// traffic.ErrInvalidSpec, which the errors about a traffic block wrap.
var ErrInvalidSpec = traffic.ErrInvalidSpec

// BoundRevision is a revision a spec names with its runner: the pool runs
// it under Name on Runner if it is not running already (at start, and
// at every Apply), and numbers its next revision after the highest bound
// one.
type BoundRevision struct {
	// Name is the revision's name as the pool names revisions, such as
	// hello-00001: the service's name and a number of five digits or
	// more, from 1.
	Name string
	// Runner runs its instances, such as the runner of its Deployment;
	// required. A running revision of that name must have the same one.
	Runner Runner
	// Where says what Runner runs, for errors: "Deployment apps/hello-v1".
	Where string
	// Latest says this is the revision the spec's own Template and Runner
	// make (the section's own Deployment): the latest revision is named
	// Name rather than numbered after the others. Runner is then unused.
	Latest bool
	// Entry is the index of the traffic entry binding it, for errors.
	Entry int
}

// RevisionStore keeps what the pool knows of each service's revisions
// beyond the process (a durable store). Nil in Options: revisions live
// in the process, and names begin again at start.
type RevisionStore interface {
	// LoadRevisions returns what SaveRevisions last kept of the service
	// named name; ok is false when nothing was.
	LoadRevisions(name string) (saved SavedRevisions, ok bool, err error)
	// SaveRevisions keeps every s, returning once they are durable.
	SaveRevisions(s []SavedRevisions) error
	// RevisionSpec makes again the spec of a revision of the service
	// named name, kept with recipe (ServiceSpec.Recipe), to run it again
	// after a restart: its runner, engine config and limits.
	RevisionSpec(name string, recipe []byte) (ServiceSpec, error)
}

// SavedRevisions is what a RevisionStore keeps of one service.
type SavedRevisions struct {
	Service string `json:"service"`
	// Number is the highest revision number made: the next is one more.
	Number int `json:"number"`
	// Latest is the newest revision, made from the spec then in force.
	Latest SavedRevision `json:"latest"`
	// Others are the service's other revisions, running or retired and
	// kept scaled to zero, oldest retired first.
	Others []SavedRevision `json:"others"`
	// TrafficSet says Traffic is the block SetTraffic set last (empty:
	// all to the latest ready revision), in force while the spec's own
	// traffic is SpecTraffic (a spec with other traffic replaces it);
	// false when the spec's traffic is in force.
	TrafficSet  bool             `json:"traffic_set,omitempty"`
	Traffic     []traffic.Target `json:"traffic,omitempty"`
	SpecTraffic []traffic.Target `json:"spec_traffic,omitempty"`
}

// SavedRevision is one revision a RevisionStore keeps.
type SavedRevision struct {
	Name string `json:"name"`
	// Template is its spec's Template: a spec with the same one at start
	// is this revision again.
	Template string `json:"template"`
	// Recipe is its spec's Recipe, for RevisionStore.RevisionSpec.
	Recipe []byte `json:"recipe,omitempty"`
	// Where is what its runner ran, when a spec bound it.
	Where   string    `json:"where,omitempty"`
	Created time.Time `json:"created"`
	// Retired is when it stopped taking traffic; zero while it ran.
	Retired time.Time `json:"retired,omitzero"`
}
