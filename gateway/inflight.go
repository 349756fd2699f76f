package gateway

// This file is the in-flight bound: the memory that request bodies hold
// while they are served, counted as the bytes arrive and shared so that
// nothing a client does before it is verified can take all of it.

import (
	"net"
	"sync"
	"sync/atomic"
)

// inFlight counts the bytes that requests being served hold, against a
// bound. It never queues: a request whose next bytes do not fit is cut.
//
// The bound is shared three ways, as a security engineer sizes a front
// door that tenants behind one address (NAT, proxy, load balancer) and
// strangers both reach:
//
//   - a request nobody vouches for yet (its signature unchecked, or the
//     native API, which is not signed) counts against its client
//     address's share (share bytes) and may use only the bound less the
//     reserve: one address, or a crowd of slow clients, can hold at most
//     that;
//   - a request of a proven client (its access key id verified from its
//     address lately, see awsjson.FailureBound) counts against its key's
//     share instead, and may use the reserve too: a tenant that signs
//     correctly finds room, whatever strangers hold;
//   - what one key holds is bounded by the same share, so no tenant takes
//     the reserve from the others.
type inFlight struct {
	max     int64 // < 0: no bound
	reserve int64 // of max, for proven clients only
	share   int64 // most one address (unproven) or one key (proven) may hold
	n       atomic.Int64

	mu      sync.Mutex
	holders map[holder]int64 // what each address or key holds now; no zero entries
}

// holder is who a request's bytes are counted against: a client address,
// or a proven access key id.
type holder struct {
	key    string // the access key id, for a proven client
	addr   string // the client address, else
	proven bool
}

// newInFlight returns a bound of bound bytes (< 0: none) with its
// reserve and shares: a quarter of it reserved for proven clients, an
// eighth (at least one largest body) the most one holder may take.
func newInFlight(bound, maxBody int64) *inFlight {
	f := &inFlight{max: bound, holders: map[holder]int64{}}
	if bound > 0 {
		f.reserve = bound / 4
		f.share = min(bound, max(bound/8, maxBody))
	}
	return f
}

// holderOf is the holder of a request from remote ("ip:port") with access
// key id key, proven or not.
func holderOf(remote, key string, proven bool) holder {
	if proven {
		return holder{key: key, proven: true}
	}
	addr := remote
	if host, _, err := net.SplitHostPort(remote); err == nil {
		addr = host
	}
	return holder{addr: addr}
}

// acquire counts n more bytes held by h, or returns false if that would
// pass h's share or the bound open to h. One request larger than the
// share is still served when its holder holds nothing else and the bound
// has room (a body up to the body limit is always possible alone).
func (f *inFlight) acquire(h holder, n int64) bool {
	if f.max < 0 || n <= 0 {
		return true
	}
	limit := f.max
	if !h.proven {
		limit -= f.reserve
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	held := f.holders[h]
	if held > 0 && held+n > f.share {
		return false
	}
	if total := f.n.Load(); total > 0 && total+n > limit {
		return false
	}
	f.holders[h] = held + n
	f.n.Add(n)
	return true
}

// release returns n bytes that acquire counted for h.
func (f *inFlight) release(h holder, n int64) {
	if f.max < 0 || n <= 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if held := f.holders[h] - n; held > 0 {
		f.holders[h] = held
	} else {
		delete(f.holders, h)
	}
	f.n.Add(-n)
}

// holding is the number of addresses and keys holding bytes now.
func (f *inFlight) holding() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.holders)
}
