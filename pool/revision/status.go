package revision

import (
	"cmp"
	"slices"
)

// ServiceStatus is one service in the admin listing: the counts of its
// latest ready revision (Revision.Status) and the instances of every
// revision.
type ServiceStatus struct {
	Name        string           `json:"name"`
	Revision    string           `json:"revision"`
	Recommended int              `json:"recommended"`
	Driver      string           `json:"driver"`
	InFlight    int              `json:"in_flight"`
	Pending     int              `json:"pending"`
	ColdStart   float64          `json:"expected_cold_start_seconds"`
	Instances   []InstanceStatus `json:"instances"`
	// Rejected counts the requests answered 429 (every instance busy at
	// max instances for the whole pending wait).
	Rejected uint64 `json:"rejected"`
	// Scales are the last scale decisions, oldest first.
	Scales []ScaleEvent `json:"scale_decisions"`
}

// InstanceStatus is one instance in the admin listing.
type InstanceStatus struct {
	Name        string  `json:"name"`
	Revision    string  `json:"revision"`
	State       string  `json:"state"` // starting, ready, draining, unhealthy, stopping
	PID         int     `json:"pid,omitempty"`
	Port        int     `json:"port,omitempty"`
	InFlight    int     `json:"in_flight"`
	ACT         int     `json:"act"`
	Concurrency float64 `json:"concurrency"`
	CPU         float64 `json:"cpu_cores"`
	Recommended bool    `json:"recommended"`
}

// Status lists the revision as the admin listing shows a service: its
// counts, its last scale decisions and its instances in the order they
// were started.
func (rv *Revision) Status() ServiceStatus {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	st := rv.eng.Stats()
	s := ServiceStatus{
		Name: rv.service, Revision: rv.name,
		Recommended: rv.lastRec.Count, Driver: rv.lastRec.Driver.String(),
		InFlight: st.InFlight, Pending: st.Pending,
		ColdStart: rv.eng.ExpectedColdStart().Seconds(),
		Instances: []InstanceStatus{},
		Rejected:  rv.rejected, Scales: append([]ScaleEvent{}, rv.scales...),
	}
	ids := make([]*instance, 0, len(rv.insts))
	for _, in := range rv.insts {
		ids = append(ids, in)
	}
	slices.SortFunc(ids, func(a, b *instance) int { return cmp.Compare(a.id, b.id) })
	for _, in := range ids {
		// An instance the engine has let go is listed until it has exited.
		info, ok := rv.eng.Instance(in.id)
		state := "stopping"
		switch {
		case in.unhealthy: // forgotten by the engine, finishing its requests
			state, info.InFlight = "unhealthy", in.inFlight
		case ok:
			state = info.State.String()
		}
		is := InstanceStatus{
			Name: in.name, Revision: rv.name, State: state,
			Port: in.port, InFlight: info.InFlight, ACT: info.ACT,
			Concurrency: round3(in.conc), CPU: round3(in.cpu), Recommended: info.Recommended,
		}
		if in.run != nil {
			is.PID = in.run.PID()
		}
		s.Instances = append(s.Instances, is)
	}
	return s
}
