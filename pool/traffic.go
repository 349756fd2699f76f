package pool

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/tollgate/autoscale"
)

// MaxRevisions bounds the revisions a service keeps running: the latest,
// the latest ready and those its traffic names or tags. A traffic block
// that would keep more is refused.
const MaxRevisions = 10

// MaxTrafficEntries bounds the entries of a traffic block (a config's or
// a PUT's): at most MaxRevisions revisions take a share, so the rest are
// tags, and 100 entries leave room for 90 tags.
const MaxTrafficEntries = 100

// TagHeader names a tag in a request, as a TAG--- prefix of its Host
// does (a Cloud Run tagged URL): the request goes to the revision with
// that tag, whatever its percent.
const TagHeader = "X-Tollgate-Revision-Tag"

// TrafficTarget is one entry of a service's traffic block, as Knative's
// and Cloud Run's: a revision by name or the latest ready revision, the
// percent of requests it takes, and an optional tag that reaches it
// directly. A tag-only entry has percent 0.
type TrafficTarget struct {
	// RevisionName is a revision the pool runs, such as hello-00002.
	RevisionName string `json:"revision,omitempty"`
	// LatestRevision, instead of RevisionName, follows the latest ready
	// revision.
	LatestRevision bool `json:"latest_revision,omitempty"`
	// Percent of the service's untagged requests, 0 to 100.
	Percent int `json:"percent"`
	// Tag, when set, is a DNS label (no "--") that reaches the revision
	// by TAG---host or by TagHeader.
	Tag string `json:"tag,omitempty"`
}

// TrafficError is a traffic block the pool refuses; Entry is the index
// of the entry at fault, or -1 for the block as a whole. It wraps
// ErrInvalidSpec.
type TrafficError struct {
	Service string // the service whose traffic is refused
	Entry   int    // the entry at fault, or -1
	Msg     string // why, without the service and entry
}

// Error says which service, which entry and why.
func (e *TrafficError) Error() string {
	if e.Entry < 0 {
		return fmt.Sprintf("service %s: traffic: %s", e.Service, e.Msg)
	}
	return fmt.Sprintf("service %s: traffic[%d]: %s", e.Service, e.Entry, e.Msg)
}

// Unwrap returns ErrInvalidSpec.
func (e *TrafficError) Unwrap() error { return ErrInvalidSpec }

// TagPattern is what a tag must match: a DNS label, lower case, without
// "--" (so that the first "---" of a Host ends the tag).
var TagPattern = regexp.MustCompile(`^[a-z]([a-z0-9]|-[a-z0-9]){0,62}$`)

// CheckTraffic checks a traffic block on its own: at most
// MaxTrafficEntries entries, each naming one revision or the latest,
// percents in [0, 100] summing to 100, tags valid and unique, a percent-0
// entry tagged, and at most MaxRevisions revisions. Whether the named revisions exist is the pool's to check.
func CheckTraffic(service string, t []TrafficTarget) error {
	if len(t) == 0 {
		return nil
	}
	bad := func(i int, format string, args ...any) error {
		return &TrafficError{Service: service, Entry: i, Msg: fmt.Sprintf(format, args...)}
	}
	if len(t) > MaxTrafficEntries {
		return bad(-1, "%d entries; at most %d", len(t), MaxTrafficEntries)
	}
	sum := 0
	tags := map[string]int{}
	revs := map[string]bool{}
	for i, e := range t {
		switch {
		case e.LatestRevision == (e.RevisionName != ""):
			return bad(i, "give either revision or latest_revision: true")
		case e.Percent < 0 || e.Percent > 100:
			return bad(i, "percent %d not in [0, 100]", e.Percent)
		case e.Percent == 0 && e.Tag == "":
			return bad(i, "percent 0 without a tag reaches nothing")
		case e.Tag != "" && !TagPattern.MatchString(e.Tag):
			return bad(i, "tag %q is not a lower-case DNS label without \"--\"", e.Tag)
		case e.RevisionName != "" && !strings.HasPrefix(e.RevisionName, service+"-"):
			return bad(i, "revision %q is not one of service %s (%s-00001, ...)", e.RevisionName, service, service)
		}
		if j, dup := tags[e.Tag]; dup && e.Tag != "" {
			return bad(i, "tag %q already given to entry %d", e.Tag, j)
		}
		tags[e.Tag] = i
		revs[e.RevisionName] = true // "" is the latest
		sum += e.Percent
	}
	if sum != 100 {
		return bad(-1, "percents sum to %d, not 100", sum)
	}
	if len(revs) > MaxRevisions {
		return bad(-1, "%d revisions; a service keeps at most %d", len(revs), MaxRevisions)
	}
	return nil
}

// routing is one service's traffic, resolved to revisions; it is replaced
// whole, never changed.
type routing struct {
	// slots give each revision its percent of 100 slots, as
	// autoscale.Split lays them out; the n-th request takes slot
	// autoscale.SplitSlot(n) (n·37 mod 100), so every 100 requests in a
	// row give each revision exactly its percent, interleaved.
	slots [100]*revision
	// keyed are the slots of sticky requests (pickKey): the same shares
	// laid oldest revision first (keyedSlots).
	keyed [100]*revision
	tags  map[string]*revision
}

// pick returns the revision of the n-th untagged request: the slot
// autoscale.SplitSlot gives it.
func (rt *routing) pick(n uint64) *revision {
	return rt.slots[autoscale.SplitSlot(n)]
}

// requestTag is the tag a request names, in lower case (tags are DNS
// labels, and DNS is case-insensitive: CANARY---host is canary's): its
// TagHeader, else the part of its Host before "---"; "" for none.
func requestTag(r *http.Request) string {
	if t := r.Header.Get(TagHeader); t != "" {
		return strings.ToLower(t)
	}
	if i := strings.Index(r.Host, "---"); i > 0 {
		return strings.ToLower(r.Host[:i])
	}
	return ""
}

// revisionByName is svc's running revision name, or nil; p.mu is held.
func (svc *service) revisionByName(name string) *revision {
	for _, rv := range svc.revs {
		if rv.name == name {
			return rv
		}
	}
	return nil
}

// checkNames reports the first entry of t that names a revision svc
// neither runs nor keeps (next, when not "", is the revision about to be made, then the
// latest; bound are revisions about to run, BoundRevision), or that t
// would keep more than MaxRevisions running; p.mu is held.
func (svc *service) checkNames(t []TrafficTarget, next string, bound []string) error {
	keep := map[string]bool{}
	if next != "" {
		keep[next] = true
	} else if svc.latest != nil {
		keep[svc.latest.name] = true
	}
	if cur := svc.cur.Load(); cur != nil {
		keep[cur.name] = true
	}
	for _, e := range t {
		if e.RevisionName != "" {
			keep[e.RevisionName] = true
		}
	}
	if len(keep) > MaxRevisions {
		return &TrafficError{Service: svc.name, Entry: -1,
			Msg: fmt.Sprintf("would keep %d revisions running (the latest, the latest ready and those named); at most %d", len(keep), MaxRevisions)}
	}
	for i, e := range t {
		if e.RevisionName != "" && e.RevisionName != next && !slices.Contains(bound, e.RevisionName) &&
			svc.revisionByName(e.RevisionName) == nil && svc.keptByName(e.RevisionName) == nil {
			have := make([]string, 0, len(svc.revs)+len(svc.kept))
			for _, rv := range svc.revs {
				have = append(have, rv.name)
			}
			for _, k := range svc.kept {
				have = append(have, k.name+" (retired)")
			}
			return &TrafficError{Service: svc.name, Entry: i,
				Msg: fmt.Sprintf("revision %q is neither running nor kept (have: %s)", e.RevisionName, strings.Join(have, ", "))}
		}
		if k := svc.keptByName(e.RevisionName); k != nil && svc.revisionByName(e.RevisionName) == nil && !slices.Contains(bound, e.RevisionName) {
			// On Kubernetes every unbound revision ran on the section's
			// one Deployment: running an old one again would scale it
			// beside the revision it runs now.
			for _, rv := range svc.revs {
				if rv.runner == k.spec.Runner {
					return &TrafficError{Service: svc.name, Entry: i,
						Msg: fmt.Sprintf("retired revision %s ran on %s, which now runs revision %s: bind each revision to its own Deployment (deployment:) to roll back", k.name, orRunner(k.where), rv.name)}
				}
			}
		}
	}
	return nil
}

// reroute resolves svc.traffic to its revisions and publishes it, then
// retires the running revisions it leaves without a share or a tag,
// other than the latest and the latest ready; p.mu is held and the names
// were checked.
func (p *Pool) reroute(svc *service) {
	ready := svc.cur.Load()
	t := svc.traffic
	if len(t) == 0 {
		t = []TrafficTarget{{LatestRevision: true, Percent: 100}}
	}
	rt := &routing{tags: map[string]*revision{}}
	keep := map[*revision]bool{svc.latest: true, ready: true}
	targets, percents := make([]*revision, len(t)), make([]int, len(t))
	for i, e := range t {
		rv := ready
		if !e.LatestRevision {
			rv = svc.revisionByName(e.RevisionName)
		}
		keep[rv] = true
		targets[i], percents[i] = rv, e.Percent
		if e.Tag != "" {
			rt.tags[e.Tag] = rv
		}
	}
	// The slots as autoscale.Split lays them out (t was checked: its
	// percents sum to 100), the simulator's arithmetic.
	split, err := autoscale.NewSplit(percents)
	keyed, kerr := keyedSlots(svc.revs, targets, percents)
	for s := range rt.slots {
		rt.slots[s], rt.keyed[s] = ready, ready
		if err == nil {
			rt.slots[s] = targets[split.Entry(s)]
		}
		if kerr == nil {
			rt.keyed[s] = keyed[s]
		}
	}
	svc.route.Store(rt)
	svc.pruneOld()
	now := time.Now()
	var retired []*revision
	svc.revs = slices.DeleteFunc(svc.revs, func(rv *revision) bool {
		if keep[rv] || rv.warming() {
			return false // kept, or a pending traffic change warms it up
		}
		by := p.drainBound(rv, now)
		rv.retire(by)
		svc.keep(rv, now)
		svc.old = append(svc.old, rv)
		retired = append(retired, rv)
		return true
	})
	over := svc.overMax()
	for _, rv := range retired {
		p.log.Info("revision takes no traffic; draining it by its requests in flight", "service", svc.name, "revision", rv.name,
			"instances", rv.instanceCount(), "over_max_instances", over[rv].revisionChange, "over_max_reason", overMaxReasonRevision,
			"stop_by", p.drainBound(rv, now).UTC().Format(time.RFC3339))
	}
}

// pruneOld forgets the retired revisions that have stopped; p.mu is held.
func (svc *service) pruneOld() {
	svc.old = slices.DeleteFunc(svc.old, func(rv *revision) bool {
		select {
		case <-rv.finished:
			return true
		default:
			return false
		}
	})
}
