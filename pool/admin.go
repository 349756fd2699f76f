package pool

import (
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"
)

// ServiceStatus is one service in the admin listing.
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

// Status lists every service and its instances, services by name and
// instances by revision and start: those of retired revisions still
// draining and of the other running revisions (oldest first), then the
// latest ready revision's. The counts are the latest ready revision's;
// Revisions has each revision's.
func (p *Pool) Status() []ServiceStatus {
	type listed struct {
		*service
		others []*revision
	}
	p.mu.Lock()
	svcs := make([]listed, 0, len(p.services))
	for _, s := range p.services {
		s.pruneOld()
		others := slices.Clone(s.old)
		for _, rv := range s.revs {
			if rv != s.cur.Load() {
				others = append(others, rv)
			}
		}
		svcs = append(svcs, listed{s, others})
	}
	p.mu.Unlock()
	slices.SortFunc(svcs, func(a, b listed) int { return strings.Compare(a.name, b.name) })
	out := make([]ServiceStatus, 0, len(svcs))
	for _, s := range svcs {
		st := s.cur.Load().status()
		ins := []InstanceStatus{}
		for _, rv := range s.others {
			ins = append(ins, rv.status().Instances...)
		}
		st.Instances = append(ins, st.Instances...)
		out = append(out, st)
	}
	return out
}

func (rv *revision) status() ServiceStatus {
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

// AdminHandler answers GET with the JSON listing of Status:
// {"services": [...], "time": "..."}. Mount it behind authentication. Its
// Help method says so in a line, for an index of admin endpoints.
func (p *Pool) AdminHandler() http.Handler {
	return adminHandler(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET")
			http.Error(w, r.Method+" not allowed; use GET", http.StatusMethodNotAllowed)
			return
		}
		body, err := json.MarshalIndent(struct {
			Time     time.Time       `json:"time"`
			Services []ServiceStatus `json:"services"`
		}{time.Now().UTC(), p.Status()}, "", "  ")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(append(body, '\n'))
	})
}

// adminHandler is the pool's admin endpoint, with its line of help.
type adminHandler func(http.ResponseWriter, *http.Request)

// ServeHTTP calls h.
func (h adminHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h(w, r) }

// Help says what the endpoint shows.
func (adminHandler) Help() string {
	return "every autoscaled service: revisions, instances (state, pid, port, in flight, concurrency, CPU) and the recommended count"
}
