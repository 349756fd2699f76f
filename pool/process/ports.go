package process

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Instance ports are picked outside the kernel's ephemeral port range
// (net.ipv4.ip_local_port_range), as Nomad's dynamic ports are. An
// instance is given its port before it listens, a whole cold start
// before when its start is slow; a port from the ephemeral range
// (what listening on port 0 gives) can meanwhile become the local port
// of an outgoing connection (tollgate's own to other instances, to
// Redis, or any client on the host), and the instance's listen then
// fails with "address already in use". Seen with 20,000 clients on the
// same host during a 20 s cold start (bench/autoscale-long.sh crowd).
const (
	// dynamicLow and dynamicHigh bound the preferred range, [low, high).
	dynamicLow, dynamicHigh = 20000, 32000
	// minCandidates is the fewest ports a range must offer to be used.
	minCandidates = 1000
	// portTries is how many candidates are tried before giving up.
	portTries = 50
)

// portRange is a half-open range of ports, [lo, hi).
type portRange struct{ lo, hi int }

// candidatePorts is the instance port ranges of this host, read once.
var candidatePorts = sync.OnceValue(func() []portRange {
	lo, hi, err := ephemeralRange()
	if err != nil {
		return nil // listen on port 0, as before
	}
	return portCandidates(lo, hi)
})

// ephemeralRange reads the kernel's ephemeral port range, inclusive.
func ephemeralRange() (lo, hi int, err error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0, fmt.Errorf("reading the ephemeral port range: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("ephemeral port range %q: want two numbers", b)
	}
	if lo, err = strconv.Atoi(f[0]); err == nil {
		hi, err = strconv.Atoi(f[1])
	}
	if err != nil {
		return 0, 0, fmt.Errorf("ephemeral port range %q: %w", b, err)
	}
	return lo, hi, nil
}

// portCandidates is where instance ports are picked given the ephemeral
// range [eLo, eHi]: the dynamic range minus the ephemeral one; failing
// that (too few left), every unprivileged port outside it; nil when
// even that leaves too few (then the kernel picks, ephemeral or not).
func portCandidates(eLo, eHi int) []portRange {
	for _, r := range []portRange{{dynamicLow, dynamicHigh}, {1024, 65536}} {
		var out []portRange
		n := 0
		for _, part := range []portRange{{r.lo, min(r.hi, eLo)}, {max(r.lo, eHi+1), r.hi}} {
			if part.hi > part.lo {
				out = append(out, part)
				n += part.hi - part.lo
			}
		}
		if n >= minCandidates {
			return out
		}
	}
	return nil
}

// pickPort picks a random port of ranges.
func pickPort(ranges []portRange) int {
	n := 0
	for _, r := range ranges {
		n += r.hi - r.lo
	}
	k := rand.IntN(n)
	for _, r := range ranges {
		if k < r.hi-r.lo {
			return r.lo + k
		}
		k -= r.hi - r.lo
	}
	panic("unreachable")
}

// heldPorts are the ports given to this process's live instances, of
// every Runner: an instance is given its port a whole cold start before
// it listens, so the port is free to bind meanwhile, and another
// service's start must not be given it too (its readiness check would
// then pass on the first instance's listener). Each is also reserved
// host-wide, against other tollgates (see hostPortsDir).
var heldPorts = portSet{held: map[int]*os.File{}, dir: hostPortsDir}

// portSet is a set of ports, safe for concurrent use, with each port's
// host-wide reservation (nil without one).
type portSet struct {
	mu   sync.Mutex
	held map[int]*os.File
	dir  func() (string, error) // hostPortsDir; nil reserves in this process only
}

// hold adds port unless it is there already or another process has
// reserved it; it reports whether it added it. err is the reason a
// host-wide reservation could not be tried (the port is then held in
// this process only).
func (s *portSet) hold(port int) (ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, taken := s.held[port]; taken {
		return false, nil
	}
	var f *os.File
	if s.dir != nil {
		dir, derr := s.dir()
		if derr == nil {
			f, derr = lockPort(dir, port)
			if errors.Is(derr, errPortLocked) {
				return false, nil
			}
		}
		err = derr
	}
	s.held[port] = f
	return true, err
}

// release removes port and its host-wide reservation.
func (s *portSet) release(port int) {
	s.mu.Lock()
	f, ok := s.held[port]
	delete(s.held, port)
	s.mu.Unlock()
	if ok && f != nil {
		unlockPort(f)
	}
}

// warnHostPorts says once that ports are reserved in this process only.
var warnHostPorts sync.Once

// freePort picks a free loopback port no live instance of this process
// or another tollgate of the host holds, outside the ephemeral range
// where the host allows it.
func (r *Runner) freePort() (int, error) {
	ranges := candidatePorts()
	if p := r.opts.Ports; !p.IsZero() {
		ranges = []portRange{{p.Low, p.High + 1}}
	}
	var last error
	for range portTries {
		addr := "127.0.0.1:0"
		if ranges != nil {
			addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(pickPort(ranges)))
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			last = err // in use: try another
			continue
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		ok, err := heldPorts.hold(port)
		if err != nil && r.log != nil {
			warnHostPorts.Do(func() {
				r.log.Warn("instance ports are reserved in this tollgate only: another tollgate on this host could give its instance the same port", "err", err)
			})
		}
		if ok {
			return port, nil
		}
	}
	if last != nil {
		return 0, fmt.Errorf("no free port after %d tries: %w", portTries, last)
	}
	return 0, errors.New("no free port: every one tried is held by a live instance")
}
