package retry

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// DefaultMaxBufferedBody is how many bytes of a request body without GetBody
// [Transport] buffers so that it can send the body again.
const DefaultMaxBufferedBody = 1 << 20

// drainLimit is how much of a discarded response body is read so that its
// connection can be reused.
const drainLimit = 64 << 10

type markKey struct{}

// MarkRetryable returns a context that marks the requests made with it as
// safe to retry, whatever their method: use it for a POST or PATCH the
// server handles idempotently.
//
//	req = req.WithContext(retry.MarkRetryable(req.Context()))
func MarkRetryable(ctx context.Context) context.Context {
	return context.WithValue(ctx, markKey{}, true)
}

// SafeToRetry reports whether req may be sent more than once: its method is
// GET, HEAD, OPTIONS, TRACE, PUT or DELETE (an empty method means GET), it
// carries an Idempotency-Key or X-Idempotency-Key header, or its context was
// marked with [MarkRetryable].
func SafeToRetry(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions,
		http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	if _, ok := req.Header["Idempotency-Key"]; ok {
		return true
	}
	if _, ok := req.Header["X-Idempotency-Key"]; ok {
		return true
	}
	marked, _ := req.Context().Value(markKey{}).(bool)
	return marked
}

// Transport is an [http.RoundTripper] that retries requests under a
// [Policy].
//
// A request that is not [SafeToRetry], or whose body cannot be replayed, is
// sent once. A body is replayed through req.GetBody when set, otherwise by
// buffering it in memory when it is at most MaxBufferedBody bytes long; the
// bytes sent on every attempt are the same. A response with a status of 400
// or more is classified as a [*StatusError] (so its Retry-After header is
// honoured); a response that is retried is drained and closed. When the
// policy gives up after a response, that last response is returned with a
// nil error and its body unread, as from any RoundTripper; when it gives up
// after a transport error, the error is an [*Error].
//
// The policy's attempt timeout ([WithAttemptTimeout]) bounds each attempt,
// including the reading of the body of the response that is returned. The
// policy's deadline ([WithDeadline]) only bounds when a retry may start: a
// request in flight, or a response body still streaming, is never cut by
// it, so a POST sent once and a long download are limited only by the
// request's context and the attempt timeout. To bound a request that
// hangs, set [WithAttemptTimeout] (each attempt) or http.Client.Timeout
// (the whole call, waits included).
type Transport struct {
	// Base sends each attempt. Nil means http.DefaultTransport.
	Base http.RoundTripper
	// Policy decides the retries. Nil means New().
	Policy *Policy
	// MaxBufferedBody is the largest body buffered for replay. Zero means
	// DefaultMaxBufferedBody; a negative value never buffers.
	MaxBufferedBody int64

	once       sync.Once
	defaultPol *Policy
}

func (t *Transport) base() http.RoundTripper {
	if t.Base != nil {
		return t.Base
	}
	return http.DefaultTransport
}

func (t *Transport) policy() *Policy {
	if t.Policy != nil {
		return t.Policy
	}
	t.once.Do(func() { t.defaultPol = New() })
	return t.defaultPol
}

// RoundTrip sends req, retrying it as described on [Transport].
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	p := t.policy()
	if !SafeToRetry(req) {
		return t.sendOnce(p, req, req.Body)
	}
	body, replayable, err := t.replayer(req)
	if err != nil {
		return nil, err
	}
	if !replayable {
		return t.sendOnce(p, req, body.first)
	}

	var (
		last   *http.Response
		cancel context.CancelFunc
		sent   bool
	)
	discard := func() {
		if last != nil {
			drainClose(last.Body)
			last = nil
		}
		if cancel != nil {
			cancel()
			cancel = nil
		}
	}
	err = p.run(req.Context(), func(ctx context.Context) error {
		var b io.ReadCloser
		if sent {
			var gerr error
			if b, gerr = body.next(); gerr != nil {
				return Permanent(fmt.Errorf("retry: rewinding request body: %w", gerr))
			}
		} else {
			b, sent = body.first, true
		}
		resp, c, err := t.send(ctx, p, req, b)
		if err != nil {
			return err
		}
		last, cancel = resp, c
		if resp.StatusCode >= 400 {
			return &StatusError{StatusCode: resp.StatusCode, Header: resp.Header}
		}
		return nil
	}, attemptHooks{discard: discard, ownTimeout: true})
	if !sent && body.first != nil {
		// The context was done before the first attempt; the RoundTripper
		// contract still requires the body to be closed.
		body.first.Close()
	}
	if last != nil {
		if cancel != nil {
			last.Body = &cancelOnClose{ReadCloser: last.Body, cancel: cancel}
		}
		return last, nil
	}
	if cancel != nil {
		cancel()
	}
	return nil, err
}

// sendOnce sends req a single time with body, under the per-attempt timeout
// if the policy has one. The policy's deadline does not apply: it only
// bounds when a retry may start.
func (t *Transport) sendOnce(p *Policy, req *http.Request, body io.ReadCloser) (*http.Response, error) {
	resp, cancel, err := t.send(req.Context(), p, req, body)
	if err != nil {
		return nil, err
	}
	if cancel != nil {
		resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	}
	return resp, nil
}

// send makes one attempt. When the policy has an attempt timeout, it
// returns the cancel function of the attempt's context, which the caller
// must call once done with the response.
func (t *Transport) send(ctx context.Context, p *Policy, req *http.Request, body io.ReadCloser) (*http.Response, context.CancelFunc, error) {
	var cancel context.CancelFunc
	if p.attemptTimeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, p.attemptTimeout)
	}
	r := req.Clone(ctx)
	r.Body = body
	resp, err := t.base().RoundTrip(r)
	if err != nil {
		if cancel != nil {
			cancel()
		}
		return nil, nil, err
	}
	return resp, cancel, nil
}

// bodySource hands out the request body for each attempt.
type bodySource struct {
	first io.ReadCloser
	next  func() (io.ReadCloser, error)
}

// replayer prepares req's body for replay. replayable is false when the
// body is too large to buffer; body.first then streams the whole body once.
func (t *Transport) replayer(req *http.Request) (body bodySource, replayable bool, err error) {
	if req.Body == nil || req.Body == http.NoBody {
		empty := func() (io.ReadCloser, error) { return req.Body, nil }
		return bodySource{first: req.Body, next: empty}, true, nil
	}
	if req.GetBody != nil {
		return bodySource{first: req.Body, next: req.GetBody}, true, nil
	}
	limit := t.MaxBufferedBody
	if limit == 0 {
		limit = DefaultMaxBufferedBody
	}
	if limit < 0 {
		return bodySource{first: req.Body}, false, nil
	}
	data, err := io.ReadAll(io.LimitReader(req.Body, limit+1))
	if err != nil {
		req.Body.Close()
		return bodySource{}, false, fmt.Errorf("retry: buffering request body: %w", err)
	}
	if int64(len(data)) > limit {
		rest := struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(data), req.Body), req.Body}
		return bodySource{first: rest}, false, nil
	}
	req.Body.Close()
	replay := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	first, _ := replay()
	return bodySource{first: first, next: replay}, true, nil
}

func drainClose(rc io.ReadCloser) {
	if rc == nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(rc, drainLimit))
	_ = rc.Close()
}

// cancelOnClose releases an attempt's context when its response body is
// closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

var _ http.RoundTripper = (*Transport)(nil)
