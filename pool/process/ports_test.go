package process_test

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/pool/pooltest"
	"github.com/tollgate/tollgate/pool/process"
)

// TestInstancePortOutsideEphemeralRange: an instance's port is not one
// the kernel hands to outgoing connections, which could take it during
// a slow start (the instance's listen then fails "address already in
// use"; seen with 20,000 clients on the host during a 20 s cold start).
func TestInstancePortOutsideEphemeralRange(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skipf("no ephemeral port range to check against: %v", err)
	}
	f := strings.Fields(string(b))
	lo, _ := strconv.Atoi(f[0])
	hi, _ := strconv.Atoi(f[1])
	if hi-lo > 64000 {
		t.Skipf("the ephemeral range %d–%d leaves too few ports outside it", lo, hi)
	}
	r := newRunner(t, process.Options{})
	for range 3 {
		inst := pooltest.Start(t, r, pooltest.Spec())
		_, p, err := net.SplitHostPort(inst.Addr())
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(p)
		if port >= lo && port <= hi {
			t.Errorf("instance port %d is in the ephemeral range %d–%d", port, lo, hi)
		}
	}
}
