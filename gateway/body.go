package gateway

// This file is how the gateway reads request bodies: bounded per request
// and in total across requests in flight, shedding what does not fit.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// bodyBuffers recycles request body buffers of single requests.
var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// readBody reads a whole request body up to the gateway's limit into a
// pooled buffer; the caller calls release once it is done with the body.
// A body over the limit is an error wrapping errBodyTooLarge.
func (g *Gateway) readBody(w http.ResponseWriter, r *http.Request) (body []byte, release func(), err error) {
	buf := bodyBuffers.Get().(*bytes.Buffer)
	buf.Reset()
	release = func() {
		if buf.Cap() <= 64<<10 {
			bodyBuffers.Put(buf)
		}
	}
	if err := g.readBodyInto(w, r, buf); err != nil {
		release()
		return nil, func() {}, err
	}
	return buf.Bytes(), release, nil
}

// readBodyInto is readBody into a caller's (reused) buffer.
func (g *Gateway) readBodyInto(w http.ResponseWriter, r *http.Request, buf *bytes.Buffer) error {
	if r.ContentLength > g.maxBody {
		return fmt.Errorf("%w: %d bytes, limit %d", errBodyTooLarge, r.ContentLength, g.maxBody)
	}
	if r.ContentLength > 0 {
		// Room for the body and for ReadFrom's last read, which finds
		// EOF: without the MinRead the buffer would double at the end.
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, g.maxBody))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return fmt.Errorf("%w: limit %d bytes", errBodyTooLarge, g.maxBody)
	}
	if err != nil {
		return fmt.Errorf("reading body: %w", err)
	}
	return nil
}

var errBodyTooLarge = errors.New("request body too large")

// inFlight counts the bytes that requests being served hold, against a
// bound. It never queues: a request that does not fit is refused.
type inFlight struct {
	max int64 // < 0: no bound
	n   atomic.Int64
}

// acquire reserves n bytes, or returns false if that would pass the
// bound. n is capped at the bound, so one request larger than the bound
// is served when nothing else is in flight. Two requests racing for the
// last bytes may both be refused; neither is ever admitted over the bound.
func (f *inFlight) acquire(n int64) bool {
	if f.max < 0 {
		return true
	}
	n = min(n, f.max)
	if f.n.Add(n) > f.max {
		f.n.Add(-n)
		return false
	}
	return true
}

// release returns what acquire(n) reserved.
func (f *inFlight) release(n int64) {
	if f.max >= 0 {
		f.n.Add(-min(n, f.max))
	}
}

// bodyCost is what a request's body counts against the in-flight bound
// before it is read: its declared length, or the most it may be.
func (g *Gateway) bodyCost(r *http.Request) int64 {
	if r.ContentLength >= 0 && r.ContentLength <= g.maxBody {
		return r.ContentLength
	}
	return g.maxBody
}

// overloadedMessage explains a 503 for the in-flight bound.
func (g *Gateway) overloadedMessage() string {
	return fmt.Sprintf("overloaded: requests in flight hold more than %d bytes; retry after 1 s", g.inFlight.max)
}

// shed prepares the answer to a request refused by the in-flight bound:
// Retry-After: 1, and the body read and thrown away (up to the body
// limit, through a small buffer), so that the client, which may still be
// sending it, gets the 503 on a connection that stays open rather than a
// reset (net/http closes a connection with more than 256 KiB unread).
func (g *Gateway) shed(w http.ResponseWriter, r *http.Request) {
	w.Header()["Retry-After"] = []string{"1"}
	io.Copy(io.Discard, io.LimitReader(r.Body, g.maxBody))
}

// bodyErrorStatus is the status for a body that could not be read: 413 when
// it was too large, else 400.
func bodyErrorStatus(err error) int {
	if errors.Is(err, errBodyTooLarge) {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}
