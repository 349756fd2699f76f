package pool

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/tollgate/pool/revision"
	"github.com/tollgate/tollgate/pool/traffic"
)

// ErrNoService is wrapped by the errors of Revisions and SetTraffic for a
// service the pool does not run.
var ErrNoService = errors.New("pool: no such autoscaled service")

// RevisionStatus is one running revision of a service and the traffic it
// takes.
type RevisionStatus struct {
	// Name is the revision's name (K_REVISION), such as hello-00002.
	Name string `json:"name"`
	// Latest is the newest revision: the service's template.
	Latest bool `json:"latest"`
	// LatestReady is the revision latest_revision follows: the newest
	// that became ready.
	LatestReady bool `json:"latest_ready"`
	// State is "deploying" (a new revision whose first instances are
	// starting, within the rollout timeout), "failed" (no instance was
	// ready within the rollout timeout: traffic did not move to it) or
	// "ready" (any other: it serves, or scales from zero to serve).
	State string `json:"state"`
	// Message says why it failed; empty otherwise.
	Message string `json:"message,omitempty"`
	// Percent of the untagged requests it takes.
	Percent int `json:"percent"`
	// Tags reach it directly.
	Tags []string `json:"tags"`
	// Ready counts its ready instances.
	Ready int `json:"ready_instances"`
	// Runs says what its runner runs when a spec bound it
	// (BoundRevision.Where), such as "Deployment apps/hello-v1"; else
	// empty.
	Runs string `json:"runs,omitempty"`
	// MinInstances and MaxInstances are its own bounds, as its template
	// was last configured: max instances bounds each revision.
	MinInstances int `json:"min_instances"`
	MaxInstances int `json:"max_instances"`
}

// TrafficStatus is a service's traffic and its running revisions.
type TrafficStatus struct {
	// Service is the service's name.
	Service string `json:"service"`
	// Traffic is the block in force (the config's, or the last
	// SetTraffic's); empty means 100 % to the latest ready revision.
	Traffic []traffic.Target `json:"traffic"`
	// Sticky is the client key untagged requests are split by; nil: per
	// request.
	Sticky    *traffic.Sticky  `json:"sticky,omitempty"`
	Revisions []RevisionStatus `json:"revisions"`
	// Retired are the revisions kept scaled to zero after they stopped
	// taking traffic, oldest first (KeepMinRevisions and the other
	// bounds): a traffic change naming one runs it again, so a rollback
	// is a PUT.
	Retired []RetiredRevision `json:"retired"`
}

// RetiredRevision is a revision kept after it stopped taking traffic.
type RetiredRevision struct {
	Name string `json:"name"`
	// Runs says what its runner runs when a spec bound it.
	Runs string `json:"runs,omitempty"`
	// Since is when it stopped taking traffic.
	Since time.Time `json:"since"`
}

// Revisions lists service's running revisions, oldest first, with the
// share and tags each takes; the error wraps ErrNoService.
func (p *Pool) Revisions(service string) (TrafficStatus, error) {
	p.mu.RLock()
	svc := p.services[service]
	if svc == nil {
		p.mu.RUnlock()
		return TrafficStatus{}, fmt.Errorf("%w: %q", ErrNoService, service)
	}
	revs, latest, ready := slices.Clone(svc.revs), svc.latest, svc.cur.Load()
	ts := TrafficStatus{Service: service, Traffic: append([]traffic.Target{}, svc.traffic...), Sticky: svc.sticky.Load(), Retired: []RetiredRevision{}}
	for _, k := range svc.kept {
		ts.Retired = append(ts.Retired, RetiredRevision{Name: k.name, Runs: k.where, Since: k.retired.UTC()})
	}
	rt := svc.route.Load()
	// What the pool knows of each (guarded by p.mu), then what each
	// revision says of itself (under its own lock, p.mu released).
	listed := make([]RevisionStatus, len(revs))
	deploying := make([]bool, len(revs))
	for i, rv := range revs {
		listed[i] = RevisionStatus{Name: rv.Name(), Latest: rv == latest, LatestReady: rv == ready, Runs: rv.where, Message: rv.failed}
		deploying[i] = rv.deploying
	}
	p.mu.RUnlock()
	for i, rv := range revs {
		rs := listed[i]
		rs.Percent = rt.Shares()[rv]
		rs.Tags = rt.TagsOf(rv)
		st := rv.State()
		rs.Ready = st.Ready
		switch {
		case rs.Message != "":
			rs.State = "failed"
		case deploying[i] && !st.BecameReady:
			rs.State = "deploying"
		default:
			rs.State = "ready"
		}
		rs.MinInstances, rs.MaxInstances = st.Config.MinInstances, st.MaxInstances
		ts.Revisions = append(ts.Revisions, rs)
	}
	return ts, nil
}

// SetTraffic replaces service's traffic with t, as a reload with that
// traffic block would (empty: 100 % to the latest ready revision); it
// holds until a reload gives the service a traffic block different from
// the last one. A revision whose share grows first gets the instances
// its share needs (see shift): SetTraffic returns once the traffic has
// moved, within the rollout timeout, or once a later change took over. A
// block naming a retired revision the service keeps runs that revision
// again (a rollback). A block CheckTraffic refuses, or one naming a
// revision the pool neither runs nor keeps, changes nothing: the error
// is a *traffic.Error, or wraps ErrNoService; for a service whose spec
// fixes its traffic (ServiceSpec.TrafficFixed) it wraps ErrTrafficFixed;
// when a revision whose share was to grow had no instance ready within
// the rollout timeout the traffic stays where it was and the error wraps
// ErrNotReady. With Options.Revisions it returns once the new traffic
// is kept (it then outlives a restart); when keeping it fails the error
// wraps ErrNotKept.
func (p *Pool) SetTraffic(service string, t []traffic.Target) error {
	sh, err := p.setTraffic(service, t)
	if err != nil {
		return err
	}
	<-sh.done
	if sh.err != nil {
		return sh.err
	}
	return p.noteSetTraffic(service, t)
}

// setTraffic checks t and begins its shift.
func (p *Pool) setTraffic(service string, t []traffic.Target) (*shifting, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	svc := p.services[service]
	if svc == nil {
		return nil, fmt.Errorf("%w: %q", ErrNoService, service)
	}
	if why := svc.spec.TrafficFixed; why != "" {
		return nil, fmt.Errorf("%w: service %s: %s", ErrTrafficFixed, service, why)
	}
	if err := traffic.Check(service, t); err != nil {
		return nil, err
	}
	if err := svc.checkNames(t, "", nil); err != nil {
		return nil, err
	}
	if err := p.revive(svc, t); err != nil {
		return nil, err
	}
	return p.shift(svc, t, "admin API"), nil
}

// rolloutTimeoutOf is service's rollout timeout.
func (p *Pool) rolloutTimeoutOf(service string) time.Duration {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if svc := p.services[service]; svc != nil {
		return svc.spec.rolloutTimeout(p.rolloutTimeout)
	}
	return p.rolloutTimeout
}

// maxTrafficBody bounds the body of a PUT of a traffic block: 100 entries
// (traffic.MaxEntries) of at most ~150 bytes each, with room to spare.
const maxTrafficBody = 64 << 10

// RevisionsHandler serves one service's revisions, for patterns ending
// in /{service}/NAME (the wildcard, or the segment before the last): GET lists them (TrafficStatus as JSON); PUT or POST
// with {"traffic": [...]} sets the traffic (SetTraffic) and answers the
// new listing once it has moved (the write deadline extended for it), 400 for a refused block, 404 for an unknown service, 409
// for a service whose traffic only its spec sets (ErrTrafficFixed) and
// for a change that did not move because its revision never became
// ready (ErrNotReady). Mount
// it behind authentication; its Help method gives its line of help.
func (p *Pool) RevisionsHandler() http.Handler {
	return revisionsHandler(func(w http.ResponseWriter, r *http.Request) {
		service := r.PathValue("service")
		if service == "" {
			// Routed by a ServeMux.Handler lookup, which sets no path
			// values: the service is the segment before the last.
			segs := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
			if len(segs) >= 2 {
				service = segs[len(segs)-2]
			}
		}
		switch r.Method {
		case http.MethodGet, http.MethodHead:
		case http.MethodPut, http.MethodPost:
			var body struct {
				Traffic []traffic.Target `json:"traffic"`
			}
			dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxTrafficBody))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&body); err != nil {
				http.Error(w, "want {\"traffic\": [{\"revision\" or \"latest_revision\", \"percent\", \"tag\"}, ...]}: "+err.Error(), http.StatusBadRequest)
				return
			}
			// The answer waits for the traffic to move, up to the rollout
			// timeout: longer than a server's usual write timeout.
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(p.rolloutTimeoutOf(service) + revision.RequestTimeoutGrace))
			if err := p.SetTraffic(service, body.Traffic); err != nil {
				code := http.StatusBadRequest
				switch {
				case errors.Is(err, ErrNoService):
					code = http.StatusNotFound
				case errors.Is(err, ErrTrafficFixed), errors.Is(err, ErrNotReady):
					code = http.StatusConflict
				case errors.Is(err, ErrNotKept):
					code = http.StatusInternalServerError
				}
				http.Error(w, err.Error(), code)
				return
			}
		default:
			w.Header().Set("Allow", "GET, PUT, POST")
			http.Error(w, r.Method+" not allowed; use GET, or PUT the traffic", http.StatusMethodNotAllowed)
			return
		}
		ts, err := p.Revisions(service)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		out, err := json.MarshalIndent(struct {
			Time time.Time `json:"time"`
			TrafficStatus
		}{time.Now().UTC(), ts}, "", "  ")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(append(out, '\n'))
	})
}

// revisionsHandler is the pool's revisions endpoint, with its line of
// help.
type revisionsHandler func(http.ResponseWriter, *http.Request)

// ServeHTTP calls h.
func (h revisionsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h(w, r) }

// Help says what the endpoint does.
func (revisionsHandler) Help() string {
	return "an autoscaled service's revisions: the running ones with their percent, tags and state, and the retired ones a traffic change may run again"
}

// TrafficHandler is RevisionsHandler with the line of help of its PUT
// and POST routes, for an index that lists each route once.
func (p *Pool) TrafficHandler() http.Handler {
	return trafficHandler{p.RevisionsHandler()}
}

// trafficHandler is the pool's traffic endpoint, with its line of help.
type trafficHandler struct{ http.Handler }

// Help says what the endpoint does.
func (trafficHandler) Help() string {
	return "body {\"traffic\": [...]} splits an autoscaled service's traffic, as a reload with that traffic block; answers once it has moved, or 409 when its revision had no instance ready within the rollout timeout"
}
