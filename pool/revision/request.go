package revision

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/autoscale"
)

// waiter is one pending request. The engine's decision is written under
// rv.mu before ch is closed, and read after.
type waiter struct {
	ch       chan struct{}
	inst     *instance // the instance it was dispatched to
	rejected bool
	failed   string // why it is answered 503: the start it waited for failed
}

// ServeHTTP routes, waits and proxies one request. The slot the engine
// gives it is released by the deferred finish on every path. The
// service's request timeout bounds it all, the pending wait included: it
// replaces the server's read and write deadlines for this request (a
// long upload, download or computation is the service's to bound, as on
// Cloud Run), and ends the wait and the proxied call when it passes.
func (rv *Revision) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select { // a request may come in before Run
	case <-rv.started:
	case <-r.Context().Done():
		return
	}
	start := time.Now()
	rv.mu.Lock()
	// A retiring revision still takes the odd request that found it just
	// before traffic moved: it drains before its instances stop.
	if rv.ctx == nil || rv.ctx.Err() != nil {
		rv.mu.Unlock()
		http.Error(w, "service "+rv.service+" is not running", http.StatusServiceUnavailable)
		return
	}
	lim := rv.lim
	st := rv.eng.Stats()
	if st.Ready == 0 && rv.startErr != "" && start.Before(rv.startErrUntil) {
		// The last start failed and its replacement is held back by the
		// crash-loop backoff: waiting would only end in the same failure.
		why := rv.startErr
		rv.mu.Unlock()
		rv.m.refused.WithLabelValues("start_failed").Inc()
		http.Error(w, "service "+rv.service+": "+why, http.StatusServiceUnavailable)
		return
	}
	if st.Pending >= lim.MaxPending {
		wait := rv.eng.PendingWait()
		rv.rejected++
		rv.mu.Unlock()
		rv.m.refused.WithLabelValues("pending_full").Inc()
		w.Header().Set("Retry-After", strconv.FormatInt(retryAfter(wait), 10))
		http.Error(w, fmt.Sprintf("service %s: %d requests already waiting for an instance (max_pending); retry later", rv.service, lim.MaxPending), http.StatusTooManyRequests)
		return
	}
	res := rv.eng.Route(start)
	var in *instance
	var wt *waiter
	if res.Outcome == autoscale.Served {
		in = rv.insts[res.Instance]
		in.begin(start)
	} else {
		wt = &waiter{ch: make(chan struct{})}
		rv.waiters[res.Request] = wt
	}
	if res.Started {
		rv.launch(res.Instance)
	}
	rv.mu.Unlock()
	defer func() { rv.finish(res.Request, in, wt) }()

	deadline := start.Add(lim.RequestTimeout)
	rc := http.NewResponseController(w)
	// Errors mean the writer cannot take deadlines (a test recorder):
	// then the server's own, if any, stay. The write deadline leaves a
	// moment past the request timeout to write its 504.
	_ = rc.SetReadDeadline(deadline)
	_ = rc.SetWriteDeadline(deadline.Add(RequestTimeoutGrace))
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
	defer cancel()

	if wt != nil {
		// The engine decides whether to start another instance or reject
		// (its pending wait); the request timeout bounds how long the
		// request waits for an instance on its way.
		select {
		case <-wt.ch:
		case <-ctx.Done():
			rv.m.pendingWait.Observe(time.Since(start).Seconds())
			if r.Context().Err() != nil && time.Now().Before(deadline) {
				return // the client went away: finish drops it from the queue
			}
			// The read deadline at the request timeout also cut the
			// server's watch on the client's connection, which cancels
			// r's context: that is not the client leaving (without an
			// answer here net/http sent an empty 200). The 504 closes
			// the connection, as the proxy's does.
			if r.ProtoMajor == 1 {
				w.Header().Set("Connection", "close")
			}
			http.Error(w, fmt.Sprintf("service %s: no instance became available within the request timeout (%v)", rv.service, lim.RequestTimeout), http.StatusGatewayTimeout)
			return
		}
		rv.m.pendingWait.Observe(time.Since(start).Seconds())
		if wt.failed != "" {
			http.Error(w, "service "+rv.service+": "+wt.failed, http.StatusServiceUnavailable)
			return
		}
		if wt.rejected {
			// Every slot stayed busy at max instances for the whole
			// pending wait: a retry sooner would most likely wait as long
			// again, so ask for that long (whole seconds, rounded up).
			w.Header().Set("Retry-After", strconv.FormatInt(retryAfter(res.Deadline.Sub(start)), 10))
			http.Error(w, "service "+rv.service+": every instance is busy at max instances; retry later", http.StatusTooManyRequests)
			return
		}
		in = wt.inst
	}
	rv.proxy.Serve(w, r.WithContext(ctx), in, r.Context())
}

// RequestTimeoutGrace is how long past the request timeout the answer
// saying so may take to write; the pool adds it to the request timeout
// where it waits for requests to end (a retired revision's drain).
const RequestTimeoutGrace = 5 * time.Second

// retryAfter is the Retry-After of a 429 for a request that waited
// pending for wait: wait in whole seconds, rounded up, at least 1.
func retryAfter(wait time.Duration) int64 {
	return max(1, int64((wait+time.Second-1)/time.Second))
}

// finish tells the engine request id is done (or abandoned while pending)
// and acts on the slots it frees. in is the instance it ran on, if known;
// a waiter dispatched just as its client left names its own.
func (rv *Revision) finish(id autoscale.RequestID, in *instance, wt *waiter) {
	now := time.Now()
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if in == nil && wt != nil {
		in = wt.inst
	}
	delete(rv.waiters, id)
	ev, err := rv.eng.RequestDone(now, id)
	if err != nil {
		// Rejected, or failed with its instance: the engine already
		// forgot it. One on an unhealthy instance, which the engine
		// forgot too, has finished there: the instance stops once none is
		// left.
		if in != nil && in.unhealthy {
			in.end(now)
			in.noteIdle()
		}
		return
	}
	if in != nil {
		in.end(now)
	}
	rv.apply(now, ev)
}
