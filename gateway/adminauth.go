package gateway

// This file guards the admin endpoints: the bearer token compared in
// constant time, and wrong tokens bounded per client address.

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate/bucket"
)

// AdminFailureOptions bound wrong admin tokens per client address (see
// Options.AdminFailures).
type AdminFailureOptions struct {
	// Burst is the wrong tokens an address may send at once; 0 means
	// DefaultAdminFailureBurst.
	Burst int64
	// Rate is how many a second it gets back; 0 means
	// DefaultAdminFailureRate.
	Rate float64
	// MaxClients bounds the addresses remembered; 0 means
	// DefaultAdminFailureMaxClients.
	MaxClients int
}

// Defaults of [AdminFailureOptions]: 10 wrong tokens, then one every 10 s.
const (
	DefaultAdminFailureBurst      = 10
	DefaultAdminFailureRate       = 0.1
	DefaultAdminFailureMaxClients = 65536
)

// adminFailures is a token bucket of wrong admin tokens per address. An
// address that never sends a wrong token is never remembered; the table
// is bounded (addresses whose bucket refilled are forgotten to make room,
// and past the bound a new address's failure is not remembered: it is
// still one constant-time comparison of a 32-byte digest).
type adminFailures struct {
	limit      bucket.Limit
	maxClients int

	mu         sync.Mutex
	lastForget time.Time // the last sweep for room
	clients    map[string]bucket.State
}

func newAdminFailures(o AdminFailureOptions) *adminFailures {
	if o.Burst <= 0 {
		o.Burst = DefaultAdminFailureBurst
	}
	if o.Rate <= 0 {
		o.Rate = DefaultAdminFailureRate
	}
	if o.MaxClients <= 0 {
		o.MaxClients = DefaultAdminFailureMaxClients
	}
	return &adminFailures{limit: bucket.MustLimit(o.Burst, o.Rate), maxClients: o.MaxClients, clients: map[string]bucket.State{}}
}

// addrOf is the address part of a RemoteAddr ("ip:port").
func addrOf(remote string) string {
	if host, _, err := net.SplitHostPort(remote); err == nil {
		return host
	}
	return remote
}

// wait is how long addr must wait before its token is compared again; 0
// when it may be now.
func (a *adminFailures) wait(addr string, now time.Time) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.clients[addr]
	if !ok {
		return 0
	}
	_, d := a.limit.Take(s, now, 1) // a look: the state is not kept
	return d.RetryAfter
}

// fail counts one wrong token from addr.
func (a *adminFailures) fail(addr string, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.clients[addr]
	if !ok && len(a.clients) >= a.maxClients {
		if now.Sub(a.lastForget) < time.Second {
			return // a sweep at most once a second, not a walk per failure
		}
		a.lastForget = now
		for c, cs := range a.clients {
			if cs.Full(now) {
				delete(a.clients, c)
			}
		}
		if len(a.clients) >= a.maxClients {
			return
		}
	}
	a.clients[addr], _ = a.limit.Take(s, now, 1)
}

// admin guards an admin handler with the bearer token; with no token
// configured the admin endpoints do not exist. An address that has sent
// too many wrong tokens lately is answered 429 with Retry-After, its
// token not compared, right or wrong: the bound holds guesses to Burst,
// then Rate a second, from each address.
func (g *Gateway) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !g.adminOn {
			http.NotFound(w, r)
			return
		}
		addr, now := addrOf(r.RemoteAddr), time.Now()
		if wait := g.adminFails.wait(addr, now); wait > 0 {
			w.Header().Set("Retry-After", strconv.FormatInt(retryAfterSeconds(wait), 10))
			writeNativeError(w, http.StatusTooManyRequests, "", "too many wrong admin tokens from this address; retry after "+strconv.FormatInt(retryAfterSeconds(wait), 10)+" s")
			return
		}
		auth := r.Header.Get("Authorization")
		ok := len(auth) > len("Bearer ") && strings.EqualFold(auth[:len("Bearer ")], "Bearer ")
		// Digests of equal length, compared in constant time: neither the
		// token nor its length leaks through timing.
		got := sha256.Sum256([]byte(strings.TrimSpace(auth[min(len(auth), len("Bearer ")):])))
		if subtle.ConstantTimeCompare(got[:], g.adminDigest[:]) != 1 || !ok {
			if auth != "" {
				g.adminFails.fail(addr, now) // no header at all is a browser's first try, not a guess
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="tollgate-admin"`)
			writeNativeError(w, http.StatusUnauthorized, "", "missing or wrong admin bearer token")
			return
		}
		h(w, r)
	}
}
