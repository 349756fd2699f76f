package revision

import (
	"math"
	"testing"

	"github.com/tollgate/tollgate/pool/runner"
)

// plain is an Instance that does not know its CPU allocation.
type plain struct{ runner.Instance }

// allocated is an Instance with a CPU allocation of its own.
type allocated struct {
	runner.Instance
	cpus  float64
	known bool
}

func (a allocated) CPUs() (float64, bool) { return a.cpus, a.known }

// TestEngineCPUDividesByTheInstancesAllocation: the engine divides what it
// is given by the service's CPUsPerInstance; an instance that knows its
// allocation (a pod with 2 cores of limits) must read usage / allocation
// as utilisation, and one that does not know it the service's divisor.
func TestEngineCPUDividesByTheInstancesAllocation(t *testing.T) {
	const perInstance = 0.5 // the config's cpus
	for _, c := range []struct {
		name     string
		run      runner.Instance
		cores    float64
		wantUtil float64
	}{
		{"no allocation: the config's cpus", plain{}, 0.25, 0.5},
		{"a pod of 2 cores using 1", allocated{cpus: 2, known: true}, 1, 0.5},
		{"a pod of 0.25 cores using 0.25", allocated{cpus: 0.25, known: true}, 0.25, 1},
		{"allocation not known yet", allocated{cpus: 2, known: false}, 0.25, 0.5},
		{"a zero allocation is ignored", allocated{cpus: 0, known: true}, 0.25, 0.5},
		{"an infinite allocation is ignored", allocated{cpus: math.Inf(1), known: true}, 0.25, 0.5},
	} {
		got := engineCPU(c.cores, perInstance, allocation(c.run)) / perInstance
		if math.Abs(got-c.wantUtil) > 1e-12 {
			t.Errorf("%s: utilisation %v, want %v", c.name, got, c.wantUtil)
		}
	}
}
