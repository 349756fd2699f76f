package awsjson

import (
	"net"
	"sync"
	"time"

	"github.com/tollgate/tollgate/bucket"
)

// FailureBound bounds the requests that fail authentication per client
// address: each address has a token bucket of failures (Burst, refilled at
// Rate a second), and an address whose bucket is empty is refused before
// its request is read. An address that never fails is never held, and
// the table is bounded (MaxClients): past it, new addresses are not
// tracked, each failure still costing only a bounded verification.
type FailureBound struct {
	limit      bucket.Limit
	maxClients int

	mu      sync.Mutex
	clients map[string]bucket.State // addresses that failed lately
}

// Defaults of [NewFailureBound].
const (
	DefaultFailureBurst      = 20
	DefaultFailureRate       = 1
	DefaultFailureMaxClients = 65536
)

// NewFailureBound returns a bound of burst failures per address, refilled
// at rate a second, tracking at most maxClients addresses. Zero values
// take the defaults.
func NewFailureBound(burst int64, rate float64, maxClients int) *FailureBound {
	if burst <= 0 {
		burst = DefaultFailureBurst
	}
	if rate <= 0 {
		rate = DefaultFailureRate
	}
	if maxClients <= 0 {
		maxClients = DefaultFailureMaxClients
	}
	return &FailureBound{limit: bucket.MustLimit(burst, rate), maxClients: maxClients, clients: map[string]bucket.State{}}
}

// clientOf is the address part of a RemoteAddr ("ip:port").
func clientOf(remote string) string {
	if host, _, err := net.SplitHostPort(remote); err == nil {
		return host
	}
	return remote
}

// Allow reports whether the address may still be heard: it has a failure
// left to spend.
func (f *FailureBound) Allow(remote string, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.clients[clientOf(remote)]
	if !ok {
		return true
	}
	_, d := f.limit.Take(s, now, 1) // a look: the state is not kept
	return d.Allowed
}

// Fail counts one failed request against the address.
func (f *FailureBound) Fail(remote string, now time.Time) {
	c := clientOf(remote)
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.clients[c]
	if !ok && len(f.clients) >= f.maxClients {
		f.forgetRefilled(now)
		if len(f.clients) >= f.maxClients {
			return
		}
	}
	f.clients[c], _ = f.limit.Take(s, now, 1)
}

// forgetRefilled drops the addresses whose buckets are full again: they
// say nothing a fresh entry would not.
func (f *FailureBound) forgetRefilled(now time.Time) {
	for c, s := range f.clients {
		if s.Full(now) {
			delete(f.clients, c)
		}
	}
}
