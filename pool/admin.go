package pool

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Status lists every service and its instances, services by name and
// instances by revision and start: those of retired revisions still
// draining and of the other running revisions (oldest first), then the
// latest ready revision's. The counts are the latest ready revision's;
// Revisions has each revision's.
func (p *Pool) Status() []ServiceStatus {
	type listed struct {
		*service
		others []*rev
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
		st := s.cur.Load().Status()
		ins := []InstanceStatus{}
		for _, rv := range s.others {
			ins = append(ins, rv.Status().Instances...)
		}
		st.Instances = append(ins, st.Instances...)
		out = append(out, st)
	}
	return out
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
