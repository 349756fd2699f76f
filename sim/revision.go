package sim

// This file holds a backend's revisions and traffic as a scenario gives
// them, and their checks: the shape of the server's traffic block
// (package config's, package pool's), named by field path.

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/tollgate/autoscale"
)

// Defaults and bounds of a backend's revisions and traffic.
const (
	// DefaultServiceName names the backend's service: its revisions are
	// hello-00001, hello-00002, ...
	DefaultServiceName = "hello"
	// DefaultRequestTimeout is Backend.RequestTimeout: Cloud Run's 300 s.
	DefaultRequestTimeout = 300 * time.Second
	// MaxRequestTimeout bounds Backend.RequestTimeout, as the pool's.
	MaxRequestTimeout = 60 * time.Minute
	// DefaultRolloutTimeout is Backend.RolloutTimeout, the pool's: how
	// long a traffic change waits for the receiving revision's instances.
	DefaultRolloutTimeout = 5 * time.Minute
	// MaxOverMaxGrace bounds how long a replaced revision's instances
	// may run beyond max instances to finish their requests: 15 minutes,
	// Cloud Run's grace (SPEC §3).
	MaxOverMaxGrace = 15 * time.Minute
	// MaxRevisions bounds Backend.Revisions, and the revisions a traffic
	// block keeps running, as the pool's MaxRevisions.
	MaxRevisions = 10
	// MaxTrafficChanges bounds Backend.TrafficChanges.
	MaxTrafficChanges = 100
)

// Revision is one revision of the backend's service: what a reload with
// a changed instance template deploys. Zero fields take the backend's
// values.
type Revision struct {
	// At is when it is deployed; the first revision's is 0.
	At time.Duration
	// ServiceTime, CPUPerRequest and ColdStart, when not zero, replace
	// the backend's for this revision's instances.
	ServiceTime   time.Duration
	CPUPerRequest float64
	ColdStart     time.Duration
	// Traffic, when set, is the traffic block the same reload gives: it
	// replaces the service's as the revision rolls out.
	Traffic []TrafficTarget
}

// TrafficTarget is one entry of a traffic block, as the server's config
// and admin API take it: a revision by name (SERVICE-0000N) or the latest
// ready revision, the percent of untagged requests it takes, and a tag
// by which a client group reaches it directly (Clients.Tag).
type TrafficTarget struct {
	// Revision names a revision, such as hello-00002.
	Revision string
	// LatestRevision, instead of Revision, follows the latest ready one.
	LatestRevision bool
	// Percent is in [0, 100]; a block's sum to 100. 0 needs a tag.
	Percent int
	// Tag is a lower-case DNS label without "--", unique in the block.
	Tag string
}

// TrafficChange replaces the service's traffic block at a time, as the
// admin API's PUT of a traffic block (or a reload changing only the
// traffic) does: a warm rollout, the receiving revisions started up to
// the instances their new shares need before the split moves.
type TrafficChange struct {
	// At is when the change is made.
	At time.Duration
	// Traffic is the new block; empty gives 100 % to the latest ready
	// revision.
	Traffic []TrafficTarget
}

// tagPattern is a tag, as traffic.TagPattern.
var tagPattern = regexp.MustCompile(`^[a-z]([a-z0-9]|-[a-z0-9]){0,62}$`)

// serviceNamePattern is a service name: a DNS label.
var serviceNamePattern = regexp.MustCompile(`^[a-z]([a-z0-9]|-[a-z0-9]){0,49}$`)

// revisionName is the name of the n-th revision (from 1) of service.
func revisionName(service string, n int) string { return fmt.Sprintf("%s-%05d", service, n) }

// hasRevisions reports whether b models revisions and traffic, which
// the runner then follows (and records per revision).
func (b *Backend) hasRevisions() bool {
	return len(b.Revisions) > 0 || len(b.Traffic) > 0 || len(b.TrafficChanges) > 0
}

// revisionsWithDefaults is b's revisions, at least one, each with b's
// values where it gives none.
func (b *Backend) revisionsWithDefaults() []Revision {
	revs := append([]Revision(nil), b.Revisions...)
	if len(revs) == 0 {
		revs = []Revision{{}}
	}
	for i := range revs {
		rv := &revs[i]
		if rv.ServiceTime == 0 {
			rv.ServiceTime = b.ServiceTime
		}
		if rv.CPUPerRequest == 0 {
			rv.CPUPerRequest = b.CPUPerRequest
		}
		if rv.ColdStart == 0 {
			rv.ColdStart = b.ColdStart
		}
	}
	return revs
}

// validRevisions checks s.Backend's revisions, traffic and the tags its
// clients name; s has its defaults applied.
func (s Scenario) validRevisions() error {
	b := s.Backend
	p := func(f ...any) []any { return append([]any{"backend"}, f...) }
	if !serviceNamePattern.MatchString(b.Service) {
		return invalid(p("service"), "%q is not a service name: a lower-case DNS label such as hello", b.Service)
	}
	if b.RequestTimeout < 0 || b.RequestTimeout > MaxRequestTimeout {
		return invalid(p("request_timeout"), "request_timeout %v must be in (0, %v]", b.RequestTimeout, MaxRequestTimeout)
	}
	if b.RolloutTimeout < 0 || b.RolloutTimeout > time.Hour {
		return invalid(p("rollout_timeout"), "rollout_timeout %v must be in (0, 1h]", b.RolloutTimeout)
	}
	if len(b.Revisions) > MaxRevisions {
		return invalid(p("revisions"), "%d revisions, more than %d", len(b.Revisions), MaxRevisions)
	}
	if len(b.TrafficChanges) > MaxTrafficChanges {
		return invalid(p("traffic_changes"), "%d traffic changes, more than %d", len(b.TrafficChanges), MaxTrafficChanges)
	}
	if (len(b.Revisions) > 0 || len(b.Traffic) > 0 || len(b.TrafficChanges) > 0) && b.None {
		return invalid(p("none"), "a backend with none: true has no revisions or traffic")
	}
	// deployed is how many revisions exist at t: traffic may name those.
	deployed := func(t time.Duration) int {
		n := 1
		for i, rv := range b.Revisions {
			if i > 0 && rv.At <= t {
				n = i + 1
			}
		}
		return n
	}
	tags := map[string]bool{}
	for i, rv := range b.Revisions {
		q := func(f ...any) []any { return p(append([]any{"revisions", i}, f...)...) }
		switch {
		case i == 0 && rv.At != 0:
			return invalid(q("at"), "the first revision is deployed at 0, not %v", rv.At)
		case i > 0 && (rv.At < b.Revisions[i-1].At || rv.At > s.Duration):
			return invalid(q("at"), "at %v must be in [the previous revision's at, %v]", rv.At, s.Duration)
		case rv.ServiceTime < 0 || rv.ServiceTime > time.Hour:
			return invalid(q("service_time"), "service_time %v must be in (0, 1h]", rv.ServiceTime)
		case !(rv.CPUPerRequest >= 0 && rv.CPUPerRequest <= 1e3):
			return invalid(q("cpu_per_request"), "cpu_per_request %v must be in (0, 1000]", rv.CPUPerRequest)
		case rv.ColdStart < 0 || rv.ColdStart > time.Hour:
			return invalid(q("cold_start"), "cold_start %v must be in (0, 1h]", rv.ColdStart)
		}
		if rv.Traffic != nil {
			if err := checkTraffic(q("traffic"), b.Service, rv.Traffic, i+1, tags); err != nil {
				return err
			}
		}
	}
	if len(b.Traffic) > 0 {
		if err := checkTraffic(p("traffic"), b.Service, b.Traffic, deployed(0), tags); err != nil {
			return err
		}
	}
	var prev time.Duration
	for i, c := range b.TrafficChanges {
		q := p("traffic_changes", i)
		if c.At < 0 || c.At > s.Duration || (i > 0 && c.At < prev) {
			return invalid(append(q, "at"), "at %v must be in [the previous change's at, %v]", c.At, s.Duration)
		}
		prev = c.At
		if len(c.Traffic) > 0 {
			if err := checkTraffic(append(q, "traffic"), b.Service, c.Traffic, deployed(c.At), tags); err != nil {
				return err
			}
		}
	}
	for i, c := range s.Clients {
		if c.StickyKey != "" && c.Tag != "" {
			return invalid([]any{"clients", i, "sticky_key"}, "give sticky_key or tag, not both: a tagged call goes to its tag's revision whatever its key")
		}
		if c.Tag == "" {
			continue
		}
		if !tags[c.Tag] {
			return invalid([]any{"clients", i, "tag"}, "tag %q is given by no traffic block of the backend (tags: %s)", c.Tag, strings.Join(slices.Sorted(maps.Keys(tags)), ", "))
		}
	}
	return nil
}

// checkTraffic checks one traffic block at path, as the server's config
// does: each entry names a revision (one of the first n of service) or
// the latest, percents in [0, 100] summing to 100, tags valid and unique,
// a percent-0 entry tagged, at most MaxRevisions revisions. It adds the
// block's tags to tags.
func checkTraffic(path []any, service string, t []TrafficTarget, n int, tags map[string]bool) error {
	at := func(i int, f ...any) []any { return append(append(append([]any{}, path...), i), f...) }
	seen := map[string]int{}
	revs := map[string]bool{}
	sum := 0
	for i, e := range t {
		switch {
		case e.LatestRevision == (e.Revision != ""):
			return invalid(at(i), "give either revision: NAME or latest_revision: true")
		case e.Percent < 0 || e.Percent > 100:
			return invalid(at(i, "percent"), "%d not in [0, 100]", e.Percent)
		case e.Percent == 0 && e.Tag == "":
			return invalid(at(i), "percent 0 without a tag reaches nothing: give a percent or a tag")
		case e.Tag != "" && !tagPattern.MatchString(e.Tag):
			return invalid(at(i, "tag"), "%q is not a tag: a lower-case DNS label without \"--\", such as canary", e.Tag)
		}
		if e.Revision != "" {
			k := -1
			for j := 1; j <= n; j++ {
				if e.Revision == revisionName(service, j) {
					k = j
				}
			}
			if k < 0 {
				return invalid(at(i, "revision"), "%q is not a revision deployed by then (%s to %s)", e.Revision, revisionName(service, 1), revisionName(service, n))
			}
		}
		if j, dup := seen[e.Tag]; dup && e.Tag != "" {
			return invalid(at(i, "tag"), "%q is already the tag of entry %d", e.Tag, j)
		}
		seen[e.Tag] = i
		if e.Tag != "" {
			tags[e.Tag] = true
		}
		revs[e.Revision] = true
		sum += e.Percent
	}
	if sum != 100 {
		return invalid(path, "percents sum to %d, not 100", sum)
	}
	if len(revs) > MaxRevisions {
		return invalid(path, "%d revisions; a service keeps at most %d running", len(revs), MaxRevisions)
	}
	return nil
}

// maxInstancesOf is cfg's max instances, its default applied.
func maxInstancesOf(cfg autoscale.Config) int {
	if cfg.MaxInstances == 0 {
		return autoscale.DefaultMaxInstances
	}
	return cfg.MaxInstances
}
