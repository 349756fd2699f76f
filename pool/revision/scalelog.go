package revision

import "time"

// maxScaleEvents is how many scale decisions a revision keeps for the
// admin listing.
const maxScaleEvents = 20

// ScaleEvent is one change of a revision's recommended instance count,
// with what drove it.
type ScaleEvent struct {
	Time   time.Time `json:"time"`
	From   int       `json:"from"`
	To     int       `json:"to"`
	Driver string    `json:"driver"`
	// Reason says why the count changed, as the scale log line does:
	// metrics, requests waiting, idle timeout, instance exited, min
	// instances, max instances or bounds.
	Reason string `json:"reason"`
	// DriverCount is the driver's own count before the engine's bounds
	// (min and max instances, one while requests wait, zero once idle).
	DriverCount int `json:"driver_count"`
	// NeedCPU, NeedConcurrency and NeedACT are the instances each driver
	// asked for, before rounding.
	NeedCPU         float64 `json:"need_cpu"`
	NeedConcurrency float64 `json:"need_concurrency"`
	NeedACT         float64 `json:"need_act"`
	// InFlight and Ready are the requests running and the instances ready
	// when it was decided.
	InFlight int `json:"in_flight"`
	Ready    int `json:"ready"`
	// DecidedOn says whose load the needs and InFlight are: "this
	// replica's load", or with several replicas sharing the instances
	// (LoadSharer) "every replica's load", the service's total.
	DecidedOn string `json:"decided_on"`
}

// noteScale keeps a scale decision, dropping the oldest beyond
// maxScaleEvents. Called with rv.mu held.
func (rv *Revision) noteScale(e ScaleEvent) {
	if len(rv.scales) == maxScaleEvents {
		rv.scales = append(rv.scales[:0], rv.scales[1:]...)
	}
	rv.scales = append(rv.scales, e)
}
