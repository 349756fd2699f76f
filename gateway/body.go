package gateway

// This file is how the gateway reads request bodies: counted against the
// in-flight bound as the bytes arrive (not as declared), bounded per
// request, and cut when they stop arriving.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// Defaults of the body timing options (see Options.BodyIdleTimeout).
const (
	DefaultBodyIdleTimeout = 5 * time.Second
	// DefaultFailureDelay and MaxDelayed: see Options.FailureDelay.
	DefaultFailureDelay = time.Second
	MaxDelayed          = 4096
	DefaultBodyMinRate  = 1024
	DefaultBodyTimeout  = 30 * time.Second
)

// bodyStep is the fewest bytes a body's hold grows by: a body that sends
// one byte holds this much.
const bodyStep = 4 << 10

// bodyBuffers recycles request body buffers of single requests.
var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// bodyHold is what a request's body holds of the in-flight bound; release
// gives it back.
type bodyHold struct {
	f *inFlight
	h holder
	n int64
}

func (b *bodyHold) release() {
	b.f.release(b.h, b.n)
	b.n = 0
}

// grow counts n more bytes, or reports false.
func (b *bodyHold) grow(n int64) bool {
	if !b.f.acquire(b.h, n) {
		return false
	}
	b.n += n
	return true
}

// readBody reads a whole request body of at most limit bytes into a
// pooled buffer, counting it against hold as it arrives; the caller
// calls release once it is done with the body (and hold.release). Errors
// wrap errBodyTooLarge, errBodyTooSlow or errShed.
func (g *Gateway) readBody(w http.ResponseWriter, r *http.Request, limit int64, hold *bodyHold) (body []byte, release func(), err error) {
	buf := bodyBuffers.Get().(*bytes.Buffer)
	buf.Reset()
	release = func() {
		if buf.Cap() <= 64<<10 {
			bodyBuffers.Put(buf)
		}
	}
	if err := g.readBodyInto(w, r, buf, limit, hold); err != nil {
		release()
		return nil, func() {}, err
	}
	return buf.Bytes(), release, nil
}

// bodyClock is when a body's next bytes must have arrived: within idle of
// the last read, and at minRate bytes a second on average after a first
// idle; all of it within total of the start.
type bodyClock struct {
	start   time.Time
	idle    time.Duration
	minRate float64 // bytes a second
	total   time.Duration
}

// deadline is the instant by which the read after got bytes, started at
// now, must return.
func (c bodyClock) deadline(now time.Time, got int64) time.Time {
	d := now.Add(c.idle)
	if due := c.start.Add(c.idle + time.Duration(float64(got)/c.minRate*float64(time.Second))); due.Before(d) {
		d = due
	}
	if end := c.start.Add(c.total); end.Before(d) {
		d = end
	}
	return d
}

// readBodyInto is readBody into a caller's (reused) buffer.
//
// The buffer and the hold grow together, doubling from bodyStep and only
// as bytes arrive, so a body holds at most about twice what it has sent:
// a client that declares a megabyte and sends a byte holds 4 KiB. Each
// read has a deadline (bodyClock); a body that misses it is cut, and its
// connection's later reads fail at once, so that net/http closes it
// rather than wait on it.
func (g *Gateway) readBodyInto(w http.ResponseWriter, r *http.Request, buf *bytes.Buffer, limit int64, hold *bodyHold) (err error) {
	if r.ContentLength > limit {
		w.Header().Set("Connection", "close")
		g.cutBody(w)
		return fmt.Errorf("%w: %d bytes, limit %d", errBodyTooLarge, r.ContentLength, limit)
	}
	if r.ContentLength == 0 {
		return nil // net/http's NoBody: nothing to wait for
	}
	want := limit + 1 // to see a chunked body pass the limit
	if r.ContentLength >= 0 {
		want = r.ContentLength
	}
	rc := http.NewResponseController(w)
	clock := bodyClock{start: time.Now(), idle: g.bodyIdle, minRate: g.bodyMinRate, total: g.bodyTimeout}
	var set time.Time // the read deadline in force; zero: none set
	defer func() {
		switch {
		case err != nil:
			w.Header().Set("Connection", "close")
			g.cutBody(w)
		case !set.IsZero():
			rc.SetReadDeadline(time.Time{}) // the server's own from here on
		}
	}()
	var one [1]byte
	for {
		got := int64(buf.Len())
		var p []byte
		if got >= want {
			p = one[:] // only EOF (or one byte too many) can come
		} else {
			if hold.n <= got {
				step := min(max(bodyStep, hold.n), want-got)
				if !hold.grow(step) {
					return errShed
				}
			}
			room := int(min(hold.n, want) - got)
			buf.Grow(room)
			p = buf.AvailableBuffer()[:room]
		}
		now := time.Now()
		if d := clock.deadline(now, got); set.IsZero() || d.Before(set) || d.Sub(set) > g.bodyIdle/8 {
			if rc.SetReadDeadline(d) == nil {
				set = d
			}
		}
		n, rerr := r.Body.Read(p)
		if &p[0] == &one[0] {
			if n > 0 {
				return fmt.Errorf("%w: more than its Content-Length", errBodyTooLarge)
			}
		} else {
			buf.Write(p[:n])
		}
		if int64(buf.Len()) > limit {
			return fmt.Errorf("%w: limit %d bytes", errBodyTooLarge, limit)
		}
		switch {
		case rerr == io.EOF:
			return nil
		case rerr == nil:
		case isTimeout(rerr):
			return fmt.Errorf("%w: %d of its bytes arrived in %v", errBodyTooSlow, buf.Len(), time.Since(clock.start).Round(time.Millisecond))
		default:
			var tooLarge *http.MaxBytesError
			if errors.As(rerr, &tooLarge) {
				return fmt.Errorf("%w: limit %d bytes", errBodyTooLarge, limit)
			}
			return fmt.Errorf("reading body: %w", rerr)
		}
	}
}

// isTimeout reports whether a read failed on its deadline.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// cutBody makes sure a request whose body the gateway will not read to
// its end cannot hold its connection: what net/http still reads of the
// body after the answer (it drains up to 256 KiB to keep a connection,
// else closes it) must arrive within the idle timeout.
func (g *Gateway) cutBody(w http.ResponseWriter) {
	http.NewResponseController(w).SetReadDeadline(time.Now().Add(g.bodyIdle))
}

var (
	errBodyTooLarge = errors.New("request body too large")
	errBodyTooSlow  = errors.New("request body too slow")
	errShed         = errors.New("overloaded")
)

// overloadedMessage explains a 503 for the in-flight bound.
func (g *Gateway) overloadedMessage() string {
	return fmt.Sprintf("overloaded: requests in flight hold more than this client's share of %d bytes; retry after 1 s", g.inFlight.max)
}

// slowMessage explains a 408 for a body that stopped arriving.
func (g *Gateway) slowMessage(err error) string {
	return fmt.Sprintf("%v: a body must keep arriving (no gap over %v, at least %.0f bytes a second, all within %v)", err, g.bodyIdle, g.bodyMinRate, g.bodyTimeout)
}

// bodyErrorStatus is the status for a body that could not be read: 413
// when it was too large, 408 when it stopped arriving, 503 when the
// in-flight bound had no room for it (with Retry-After: 1), else 400.
func bodyErrorStatus(w http.ResponseWriter, err error) int {
	switch {
	case errors.Is(err, errBodyTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, errBodyTooSlow):
		return http.StatusRequestTimeout
	case errors.Is(err, errShed):
		w.Header()["Retry-After"] = []string{"1"}
		return http.StatusServiceUnavailable
	}
	return http.StatusBadRequest
}
