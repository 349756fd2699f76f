package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/quota"
)

// TakeRequest is the body of POST /v1/take and one item of a batch. Give
// either Action (resolved through the service's table) or Category.
// Tokens defaults to 1; 0 inspects the bucket without taking.
type TakeRequest struct {
	Service  string `json:"service"`
	Account  string `json:"account"`
	Region   string `json:"region"`
	Action   string `json:"action,omitempty"`
	Category string `json:"category,omitempty"`
	Tokens   *int64 `json:"tokens,omitempty"`
}

// BatchRequest is the body of POST /v1/take/batch. Service, Account and
// Region, when set, apply to every item that leaves them empty.
type BatchRequest struct {
	Service  string        `json:"service,omitempty"`
	Account  string        `json:"account,omitempty"`
	Region   string        `json:"region,omitempty"`
	Requests []TakeRequest `json:"requests"`
}

// LimitJSON is a bucket's limit in API answers.
type LimitJSON struct {
	Capacity        int64   `json:"capacity"`
	RefillPerSecond float64 `json:"refill_per_second"`
}

// TakeResponse is the answer to one take.
type TakeResponse struct {
	Allowed      bool      `json:"allowed"`
	Service      string    `json:"service"`
	Category     string    `json:"category"`
	Limit        LimitJSON `json:"limit"`
	Remaining    int64     `json:"remaining"`
	RetryAfterMs int64     `json:"retry_after_ms"`
	ResetAfterMs int64     `json:"reset_after_ms"`
}

// BatchResponse is the answer to a batch, one result per request in order.
type BatchResponse struct {
	Results []TakeResponse `json:"results"`
}

// nativeError is the body of every native API error.
type nativeError struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
}

func writeNativeError(w http.ResponseWriter, status int, field, msg string) {
	writeJSON(w, status, nativeError{Error: msg, Field: field})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"error":"encoding the answer failed"}`)
	}
	body = append(body, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

// fieldError is a request problem tied to one JSON field.
type fieldError struct {
	field, msg string
}

func (e *fieldError) Error() string { return e.field + ": " + e.msg }

// decodeStrict decodes one JSON value with no unknown fields and nothing
// after it, turning decoder errors into field errors.
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		var syntaxErr *json.SyntaxError
		switch {
		case errors.As(err, &typeErr):
			return &fieldError{typeErr.Field, fmt.Sprintf("want %s, got JSON %s", typeErr.Type, typeErr.Value)}
		case errors.As(err, &syntaxErr):
			return &fieldError{"", fmt.Sprintf("malformed JSON at byte %d: %v", syntaxErr.Offset, err)}
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			name, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
			return &fieldError{name, "unknown field"}
		}
		return &fieldError{"", "malformed JSON: " + err.Error()}
	}
	if dec.More() {
		return &fieldError{"", "malformed JSON: more than one value in the body"}
	}
	return nil
}

// resolved is a validated take, ready for the limiter.
type resolved struct {
	svc    *quota.Service
	cat    *quota.Category
	key    quota.Key
	limit  bucket.Limit
	tokens int64
}

// resolve validates a take against the config; prefix names the request
// in field paths ("requests[3].").
func resolve(cfg *quota.Config, req *TakeRequest, prefix string) (resolved, error) {
	var r resolved
	field := func(name string) string { return prefix + name }
	if req.Service == "" {
		return r, &fieldError{field("service"), "missing"}
	}
	svc, ok := cfg.Service(req.Service)
	if !ok {
		return r, &fieldError{field("service"), "unknown service " + strconv.Quote(req.Service)}
	}
	if !isAccount(req.Account) {
		return r, &fieldError{field("account"), "missing or not 1-128 letters, digits, '.', '_' or '-'"}
	}
	if !isRegion(req.Region) {
		return r, &fieldError{field("region"), "missing or not 1-64 lowercase letters, digits or '-'"}
	}
	switch {
	case req.Action != "" && req.Category != "":
		return r, &fieldError{field("action"), "give action or category, not both"}
	case req.Action != "":
		if r.cat, ok = svc.CategoryOf(req.Action); !ok {
			return r, &fieldError{field("action"), "unknown action " + strconv.Quote(req.Action) + " of service " + svc.Name}
		}
	case req.Category != "":
		if r.cat, ok = svc.CategoryNamed(req.Category); !ok {
			return r, &fieldError{field("category"), "unknown category " + strconv.Quote(req.Category) + " of service " + svc.Name}
		}
	default:
		return r, &fieldError{field("action"), "missing: give action or category"}
	}
	r.svc = svc
	r.key = quota.Key{Service: svc.Name, Account: req.Account, Region: req.Region, Category: r.cat.Name}
	r.limit, _ = cfg.Limit(r.key)
	r.tokens = 1
	if req.Tokens != nil {
		r.tokens = *req.Tokens
	}
	if r.tokens < 0 {
		return r, &fieldError{field("tokens"), "must not be negative"}
	}
	if r.tokens > r.limit.Capacity() {
		return r, &fieldError{field("tokens"), fmt.Sprintf("%d exceeds the bucket's capacity %d: it can never be allowed", r.tokens, r.limit.Capacity())}
	}
	return r, nil
}

func isAccount(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func toResponse(r resolved, d bucket.Decision) TakeResponse {
	return TakeResponse{
		Allowed:      d.Allowed,
		Service:      r.svc.Name,
		Category:     r.cat.Name,
		Limit:        LimitJSON{Capacity: r.limit.Capacity(), RefillPerSecond: r.limit.RefillPerSecond()},
		Remaining:    d.Remaining,
		RetryAfterMs: ceilMillis(d.RetryAfter),
		ResetAfterMs: ceilMillis(d.ResetAfter),
	}
}

func ceilMillis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// setRateLimitHeaders maps a bucket onto the IETF RateLimit header fields
// (draft-ietf-httpapi-ratelimit-headers): the policy's quota q is the
// capacity and its window w the seconds an empty bucket takes to refill;
// r is the whole tokens remaining and t the seconds until the bucket is
// full again, rounded up.
func setRateLimitHeaders(h http.Header, r resolved, d bucket.Decision) {
	window := int64(math.Ceil(float64(r.limit.Capacity()) * r.limit.Interval().Seconds()))
	name := strconv.Quote(r.cat.Name)
	h.Set("RateLimit-Policy", name+";q="+strconv.FormatInt(r.limit.Capacity(), 10)+";w="+strconv.FormatInt(window, 10))
	h.Set("RateLimit", name+";r="+strconv.FormatInt(d.Remaining, 10)+";t="+strconv.FormatInt(int64(math.Ceil(d.ResetAfter.Seconds())), 10))
}

// serveTake handles POST /v1/take.
func (g *Gateway) serveTake(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, err := g.readBody(w, r)
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, errBodyTooLarge) {
			status = http.StatusRequestEntityTooLarge
		}
		writeNativeError(w, status, "", err.Error())
		return
	}
	var req TakeRequest
	if err := decodeStrict(body, &req); err != nil {
		writeFieldError(w, err)
		return
	}
	cfg := g.policy.Load().cfg
	res, err := resolve(cfg, &req, "")
	if err != nil {
		writeFieldError(w, err)
		return
	}
	d, err := g.limiter.Take(r.Context(), res.key.String(), res.limit, res.tokens)
	g.metrics.observe(res.svc.Name, res.cat.Name, d.Allowed, err, time.Since(start))
	if err != nil {
		g.log.Error("limiter failed", "key", res.key.String(), "error", err)
		writeNativeError(w, http.StatusServiceUnavailable, "", "throttling store unavailable: "+err.Error())
		return
	}
	setRateLimitHeaders(w.Header(), res, d)
	status := http.StatusOK
	if !d.Allowed {
		status = http.StatusTooManyRequests
		w.Header().Set("Retry-After", strconv.FormatInt(retryAfterSeconds(d.RetryAfter), 10))
	}
	writeJSON(w, status, toResponse(res, d))
}

// serveBatch handles POST /v1/take/batch: every take in one limiter call.
// The answer is 200 with one result per request; the batch is rejected
// whole, before any take, if any request is invalid.
func (g *Gateway) serveBatch(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, err := g.readBody(w, r)
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, errBodyTooLarge) {
			status = http.StatusRequestEntityTooLarge
		}
		writeNativeError(w, status, "", err.Error())
		return
	}
	var batch BatchRequest
	if err := decodeStrict(body, &batch); err != nil {
		writeFieldError(w, err)
		return
	}
	if batch.Requests == nil {
		writeNativeError(w, http.StatusBadRequest, "requests", "missing")
		return
	}
	cfg := g.policy.Load().cfg
	items := make([]resolved, len(batch.Requests))
	reqs := make([]limiter.Request, len(batch.Requests))
	for i := range batch.Requests {
		req := &batch.Requests[i]
		if req.Service == "" {
			req.Service = batch.Service
		}
		if req.Account == "" {
			req.Account = batch.Account
		}
		if req.Region == "" {
			req.Region = batch.Region
		}
		res, err := resolve(cfg, req, "requests["+strconv.Itoa(i)+"].")
		if err != nil {
			writeFieldError(w, err)
			return
		}
		items[i] = res
		reqs[i] = limiter.Request{Key: res.key.String(), Limit: res.limit, Tokens: res.tokens}
	}
	out := make([]bucket.Decision, len(reqs))
	err = g.limiter.TakeBatch(r.Context(), reqs, out)
	elapsed := time.Since(start)
	if err != nil {
		g.metrics.observe("", "", false, err, elapsed)
		g.log.Error("limiter failed", "batch", len(reqs), "error", err)
		writeNativeError(w, http.StatusServiceUnavailable, "", "throttling store unavailable: "+err.Error())
		return
	}
	resp := BatchResponse{Results: make([]TakeResponse, len(items))}
	for i, res := range items {
		g.metrics.count(res.svc.Name, res.cat.Name, out[i].Allowed)
		resp.Results[i] = toResponse(res, out[i])
	}
	g.metrics.latency.Observe(elapsed.Seconds())
	writeJSON(w, http.StatusOK, resp)
}

func writeFieldError(w http.ResponseWriter, err error) {
	var fe *fieldError
	if errors.As(err, &fe) {
		msg := fe.msg
		if fe.field != "" {
			msg = fe.field + ": " + fe.msg
		}
		writeNativeError(w, http.StatusBadRequest, fe.field, msg)
		return
	}
	writeNativeError(w, http.StatusBadRequest, "", err.Error())
}
