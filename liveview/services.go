package liveview

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// InstanceStates are the instance states the recorder keeps a series of,
// in the order pages draw them.
var InstanceStates = []string{"starting", "ready", "draining", "stopping"}

// ServiceSample is an autoscaled service's state at one instant, as
// Options.Services reports it at each tick.
type ServiceSample struct {
	Name string
	// Instances counts the service's instances by state (InstanceStates;
	// other states are kept too).
	Instances map[string]int
	// Recommended is the autoscaler's instance count and Driver the
	// metric that asked for the most.
	Recommended int
	Driver      string
	// Pending counts requests waiting for an instance.
	Pending int
	// Rejected counts the requests answered 429 so far; it only grows,
	// except when the service starts over (a new revision).
	Rejected uint64
	// Scales are the last scale decisions, oldest first; only the newest
	// sample's are served.
	Scales []ScaleDecision
	// Revisions has the service's instances per revision, with the share
	// of traffic and the tags each takes; the recorder keeps at most
	// MaxRevisions of a sample (the last ones given).
	Revisions []RevisionSample
}

// MaxRevisions bounds the revisions a service's sample and history keep,
// as the pool bounds the revisions a service runs.
const MaxRevisions = 10

// RevisionSample is one revision of a service at one instant.
type RevisionSample struct {
	// Name is the revision's, such as hello-00002.
	Name string
	// Percent of the service's untagged requests it takes, and Tags that
	// reach it directly.
	Percent int
	Tags    []string
	// Instances counts its instances, in any state.
	Instances int
}

// RevisionHistory is one revision's instance counts, aligned with
// Services.Times; a point where the revision was not sampled is 0.
type RevisionHistory struct {
	Name string
	// Percent and Tags are those of the newest sample that has the
	// revision.
	Percent   int
	Tags      []string
	Instances []int
	// lastSeen is the index of the newest point that has the revision.
	lastSeen int
}

// ScaleDecision is one change of a service's recommended instance count.
type ScaleDecision struct {
	Time     time.Time
	From, To int
	Driver   string
	// Reason says what the autoscaler saw, for people.
	Reason string
}

// ServiceHistory is one autoscaled service's points, aligned with
// Services.Times.
type ServiceHistory struct {
	Name string
	// Instances holds a series per state, for InstanceStates and any other
	// state seen.
	Instances   map[string][]int
	Recommended []int
	Pending     []int
	// Rejected counts the 429s of each point.
	Rejected []uint64
	// Driver and Scales are the newest sample's.
	Driver string
	Scales []ScaleDecision
	// Revisions holds a series per revision, by name; at most
	// MaxRevisions, those seen last.
	Revisions []RevisionHistory
}

// Services is a view of the autoscaled services' history, in columns like
// Decisions.
type Services struct {
	Times     []time.Time
	Durations []time.Duration
	Services  []ServiceHistory
}

// sampleServices records the services' state for tick i. Called by Tick
// with r.mu held; the sample function runs before the lock is taken.
func (r *Recorder) sampleServices(i int, samples []ServiceSample) {
	if r.svc == nil {
		return
	}
	cloned := false
	for k, s := range samples {
		if len(s.Revisions) > MaxRevisions {
			if !cloned { // the caller's slice stays as given
				samples, cloned = slices.Clone(samples), true
			}
			samples[k].Revisions = s.Revisions[len(s.Revisions)-MaxRevisions:]
		}
	}
	r.svc[i] = samples
}

// Services returns the autoscaled services' points that end after since,
// oldest first; a service appears if any kept point has it.
func (r *Recorder) Services(since time.Time) Services {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out Services
	if r.svc == nil {
		return out
	}
	first := max(0, r.n-r.history)
	for first < r.n && !r.ticks[first%r.history].end.After(since) {
		first++
	}
	n := r.n - first
	byName := map[string]*ServiceHistory{}
	revs := map[string]map[string]*RevisionHistory{} // service → revision → series
	for j := first; j < r.n; j++ {
		tk := r.ticks[j%r.history]
		out.Times = append(out.Times, tk.end)
		out.Durations = append(out.Durations, tk.dur)
		k := j - first
		prev, known := r.rejectedAt(j - 1)
		for _, s := range r.svc[j%r.history] {
			h := byName[s.Name]
			if h == nil {
				h = &ServiceHistory{Name: s.Name, Instances: map[string][]int{}, Recommended: make([]int, n), Pending: make([]int, n), Rejected: make([]uint64, n)}
				for _, st := range InstanceStates {
					h.Instances[st] = make([]int, n)
				}
				byName[s.Name] = h
			}
			for st, c := range s.Instances {
				if h.Instances[st] == nil {
					h.Instances[st] = make([]int, n)
				}
				h.Instances[st][k] = c
			}
			h.Recommended[k], h.Pending[k] = s.Recommended, s.Pending
			if p, ok := prev[s.Name]; ok && s.Rejected >= p {
				h.Rejected[k] = s.Rejected - p
			} else if known {
				h.Rejected[k] = s.Rejected // new, or started over
			}
			h.Driver, h.Scales = s.Driver, s.Scales
			addRevisions(revs, s, k, n)
		}
	}
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		h := byName[name]
		h.Revisions = lastRevisions(revs[name])
		out.Services = append(out.Services, *h)
	}
	return out
}

// addRevisions adds sample s's revisions to point k of the series in
// revs (of n points each).
func addRevisions(revs map[string]map[string]*RevisionHistory, s ServiceSample, k, n int) {
	if len(s.Revisions) == 0 {
		return
	}
	m := revs[s.Name]
	if m == nil {
		m = map[string]*RevisionHistory{}
		revs[s.Name] = m
	}
	for _, rv := range s.Revisions {
		h := m[rv.Name]
		if h == nil {
			h = &RevisionHistory{Name: rv.Name, Instances: make([]int, n)}
			m[rv.Name] = h
		}
		h.Instances[k] = rv.Instances
		h.Percent, h.Tags, h.lastSeen = rv.Percent, rv.Tags, k
	}
}

// lastRevisions returns the series of m by name: the MaxRevisions seen
// last when there are more.
func lastRevisions(m map[string]*RevisionHistory) []RevisionHistory {
	all := make([]*RevisionHistory, 0, len(m))
	for _, h := range m {
		all = append(all, h)
	}
	if len(all) > MaxRevisions {
		slices.SortFunc(all, func(a, b *RevisionHistory) int {
			return cmp.Or(cmp.Compare(b.lastSeen, a.lastSeen), strings.Compare(b.Name, a.Name))
		})
		all = all[:MaxRevisions]
	}
	slices.SortFunc(all, func(a, b *RevisionHistory) int { return strings.Compare(a.Name, b.Name) })
	out := make([]RevisionHistory, len(all))
	for i, h := range all {
		out[i] = *h
	}
	return out
}

// rejectedAt returns each service's 429 count at tick j, and whether tick
// j is known: before the first tick every count was 0; a tick the ring
// has dropped is unknown.
func (r *Recorder) rejectedAt(j int) (map[string]uint64, bool) {
	if j < 0 {
		return nil, true
	}
	if j < r.n-r.history {
		return nil, false
	}
	m := map[string]uint64{}
	for _, s := range r.svc[j%r.history] {
		m[s.Name] = s.Rejected
	}
	return m, true
}
