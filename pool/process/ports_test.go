package process_test

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

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

// TestInstancePortsFromASetRange: with Options.Ports, every instance is
// given a port of the range, and a bad range is refused by New.
func TestInstancePortsFromASetRange(t *testing.T) {
	t.Parallel()
	// A range of 8 free ports: a listener on port 0 shows where the
	// kernel has room; the test takes the 8 above a probe's port.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := l.Addr().(*net.TCPAddr).Port
	l.Close()
	if base > 65000 {
		base = 40000
	}
	ports := process.PortRange{Low: base + 1, High: base + 8}
	r := newRunner(t, process.Options{Ports: ports})
	t.Cleanup(func() { _ = r.Close() })
	for i := range 3 {
		spec := pooltest.Spec()
		spec.ID = fmt.Sprintf("i%d", i)
		inst, err := r.Start(t.Context(), spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = inst.Stop(time.Second) })
		_, p, _ := net.SplitHostPort(inst.Addr())
		if n, _ := strconv.Atoi(p); n < ports.Low || n > ports.High {
			t.Errorf("instance %d on port %d, outside %s", i, n, ports)
		}
	}
	for _, bad := range []string{"80-90", "30000-20000", "21000", "a-b", "60000-70000"} {
		if _, err := process.ParsePortRange(bad); err == nil {
			t.Errorf("ParsePortRange(%q) = nil error", bad)
		}
	}
	if _, err := process.New(process.Options{Command: "/bin/true", Ports: process.PortRange{Low: 10, High: 20}}); err == nil || !strings.Contains(err.Error(), "ports") {
		t.Errorf("New with ports 10-20 = %v, want an error naming ports", err)
	}
}
