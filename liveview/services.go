package liveview

import (
	"slices"
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
		}
	}
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		out.Services = append(out.Services, *byName[name])
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
