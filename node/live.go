package node

import (
	"fmt"

	"github.com/tollgate/tollgate/liveview"
	"github.com/tollgate/tollgate/pool"
)

// poolSamples reports p's autoscaled services to the live view once a
// second.
func poolSamples(p *pool.Pool) func() []liveview.ServiceSample {
	return func() []liveview.ServiceSample {
		status := p.Status()
		out := make([]liveview.ServiceSample, 0, len(status))
		for _, s := range status {
			ls := liveview.ServiceSample{Name: s.Name, Instances: map[string]int{}, Recommended: s.Recommended,
				Driver: s.Driver, Pending: s.Pending, Rejected: s.Rejected}
			for _, in := range s.Instances {
				ls.Instances[in.State]++
			}
			for _, e := range s.Scales {
				ls.Scales = append(ls.Scales, liveview.ScaleDecision{Time: e.Time, From: e.From, To: e.To, Driver: e.Driver,
					Reason: fmt.Sprintf("%s asked for %d (need: cpu %.2f, concurrency %.2f, act %.2f); %d in flight on %d ready",
						e.Driver, e.DriverCount, e.NeedCPU, e.NeedConcurrency, e.NeedACT, e.InFlight, e.Ready)})
			}
			out = append(out, ls)
		}
		return out
	}
}
