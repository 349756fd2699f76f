package node

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/pool"
)

// TestScaleWhy: the live page's "why" of a scale decision says the
// reason in words, then the numbers behind it.
func TestScaleWhy(t *testing.T) {
	for _, tc := range []struct {
		e    pool.ScaleEvent
		want string
	}{
		{pool.ScaleEvent{From: 0, To: 1, Driver: "none", Reason: "requests waiting", InFlight: 1}, "a request arrived with no instance running (scale from zero); 1 in flight on 0 ready"},
		{pool.ScaleEvent{From: 1, To: 3, Driver: "concurrency", DriverCount: 3, Reason: "metrics", NeedConcurrency: 2.6, Ready: 1}, "the concurrency metric needs 3; 0 in flight on 1 ready (instances needed by cpu 0.00, concurrency 2.60, act 0.00)"},
		{pool.ScaleEvent{From: 2, To: 0, Driver: "none", Reason: "idle timeout"}, "no request for the idle timeout: scale to zero"},
		{pool.ScaleEvent{From: 4, To: 5, Driver: "cpu", DriverCount: 9, Reason: "max instances"}, "held at max instances (the cpu metric asked for 9)"},
		{pool.ScaleEvent{From: 1, To: 0, Driver: "concurrency", DriverCount: 1, Reason: "instance exited"}, "the last instance exited on its own (crashed or failed to start) with no request waiting: the next request starts one"},
	} {
		if got := scaleWhy(tc.e); !strings.HasPrefix(got, tc.want) {
			t.Errorf("scaleWhy(%+v) = %q, want it to start with %q", tc.e, got, tc.want)
		}
	}
}
