package gateway

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/tollgate/tollgate/awsjson"
	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/internal/suggest"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/quota"
)

// TakeRequest is the body of POST /v1/take and one item of a batch. Give
// either Action (resolved through the service's table) or Category.
// Tokens defaults to 1; 0 inspects the bucket without taking.
//
// Request, for an action whose cost depends on its AWS request body (ECS
// RunTask), is that body: the take then decides every bucket the action
// takes from, all or none, as the AWS front door does (a RunTask on
// Fargate: cluster-resource-modify, fargate-run-task and one token per
// task from fargate-on-demand-tasks or fargate-spot-tasks), in place of
// Tokens. /v1/take only, not a batch item.
type TakeRequest struct {
	Service  string         `json:"service"`            // a service of the config: "ecs"
	Account  string         `json:"account"`            // 1-128 letters, digits, '.', '_' or '-'
	Region   string         `json:"region"`             // lowercase letters, digits and '-'
	Action   string         `json:"action,omitempty"`   // an action of the service, or…
	Category string         `json:"category,omitempty"` // …a category of it
	Tokens   *int64         `json:"tokens,omitempty"`   // 1 when absent; 0 looks without taking
	Request  jsontext.Value `json:"request,omitempty"`  // the action's AWS request body, for RunTask
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

// ChargedTakeResponse is the answer to a take with a Request: the fields
// of the bucket that decided (the one that refused it, else the action's
// own), and every bucket the take took from.
type ChargedTakeResponse struct {
	TakeResponse `json:",inline"`
	Buckets      []TakeResponse `json:"buckets"`
}

// appendJSON appends r as JSON. The batch endpoint writes up to
// thousands of these per request, so they are appended directly rather
// than through reflection; the output is what encoding/json would write.
func (r *TakeResponse) appendJSON(b []byte) []byte {
	b = append(b, `{"allowed":`...)
	b = strconv.AppendBool(b, r.Allowed)
	b = append(b, `,"service":`...)
	b, _ = jsontext.AppendQuote(b, r.Service)
	b = append(b, `,"category":`...)
	b, _ = jsontext.AppendQuote(b, r.Category)
	b = append(b, `,"limit":{"capacity":`...)
	b = strconv.AppendInt(b, r.Limit.Capacity, 10)
	b = append(b, `,"refill_per_second":`...)
	b = strconv.AppendFloat(b, r.Limit.RefillPerSecond, 'f', -1, 64)
	b = append(b, `},"remaining":`...)
	b = strconv.AppendInt(b, r.Remaining, 10)
	b = append(b, `,"retry_after_ms":`...)
	b = strconv.AppendInt(b, r.RetryAfterMs, 10)
	b = append(b, `,"reset_after_ms":`...)
	b = strconv.AppendInt(b, r.ResetAfterMs, 10)
	return append(b, '}')
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
	writeBody(w, status, append(body, '\n'))
}

// contentTypeJSONValue is shared by every answer; net/http never changes a
// header value it is given.
var contentTypeJSONValue = []string{"application/json"}

func writeBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = contentTypeJSONValue
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	w.Write(body)
}

// fieldError is a request problem tied to one JSON field.
type fieldError struct {
	field, msg string
}

func (e *fieldError) Error() string { return e.field + ": " + e.msg }

// decodeStrict decodes one JSON value with no unknown or duplicate
// members and nothing after it, turning decoder errors into field errors
// whose field is the path of the offending member ("requests[3].tokens").
func decodeStrict(body []byte, v any) error {
	err := json.Unmarshal(body, v, json.RejectUnknownMembers(true))
	if err == nil {
		return nil
	}
	var semErr *json.SemanticError
	var synErr *jsontext.SyntacticError
	switch {
	case errors.As(err, &semErr) && errors.Is(semErr.Err, json.ErrUnknownName):
		return unknownMember(semErr.JSONPointer)
	case errors.As(err, &semErr) && semErr.GoType != nil:
		return &fieldError{pointerField(semErr.JSONPointer), fmt.Sprintf("want %s, got JSON %s", jsonKind(semErr.GoType), semErr.JSONKind)}
	case errors.As(err, &synErr):
		return &fieldError{pointerField(synErr.JSONPointer), fmt.Sprintf("malformed JSON at byte %d: %s", synErr.ByteOffset, awsjson.ClipMessage(synErr.Err.Error()))}
	}
	return &fieldError{"", "malformed JSON: " + awsjson.ClipMessage(err.Error())}
}

// memberNames are the members of the API's request bodies (TakeRequest,
// BatchRequest), the candidates of an unknown member's "did you mean".
var memberNames = []string{"service", "account", "region", "action", "category", "tokens", "requests"}

// unknownMember is the error for the unknown member at p, with the known
// member its name is most likely a typo of.
func unknownMember(p jsontext.Pointer) error {
	return &fieldError{pointerField(p), "unknown field" + suggest.DidYouMean(p.LastToken(), memberNames)}
}

// serviceNames, actionNames and categoryNames are the candidates of a
// "did you mean" for an unknown service, action or category: an error's
// path only, never a take's.
func serviceNames(cfg *quota.Config) []string {
	var out []string
	for _, s := range cfg.Services() {
		out = append(out, s.Name)
	}
	return out
}

func actionNames(svc *quota.Service) []string {
	var out []string
	for _, c := range svc.Categories {
		out = append(out, c.Actions...)
	}
	return out
}

func categoryNames(svc *quota.Service) []string {
	var out []string
	for _, c := range svc.Categories {
		out = append(out, c.Name)
	}
	return out
}

// pointerField turns a JSON pointer, /requests/3/tokens, into the field
// path the API's errors use, requests[3].tokens, cut short if a client's
// member name makes it long.
func pointerField(p jsontext.Pointer) string {
	return awsjson.ClipMessage(pointerPath(p))
}

func pointerPath(p jsontext.Pointer) string {
	var b strings.Builder
	for tok := range p.Tokens() {
		if _, err := strconv.ParseUint(tok, 10, 64); err == nil {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int64, reflect.Int, reflect.Pointer:
		return "a whole number"
	case reflect.Slice:
		return "a list"
	case reflect.Struct:
		return "an object"
	}
	return t.String()
}

// resolved is a validated take, ready for the limiter.
type resolved struct {
	svc    *quota.Service
	cat    *quota.Category
	key    quota.Key
	limit  bucket.Limit
	tokens int64
}

// resolve validates a take against the config. Its field errors name the
// take's own fields; a batch puts "requests[i]." in front.
func (g *Gateway) resolve(cfg *quota.Config, req *TakeRequest) (resolved, error) {
	var r resolved
	if req.Service == "" {
		return r, &fieldError{"service", "missing"}
	}
	svc, ok := cfg.Service(req.Service)
	if !ok {
		return r, &fieldError{"service", "unknown service " + clip(req.Service) + suggest.DidYouMean(req.Service, serviceNames(cfg))}
	}
	if !quota.ValidAccount(req.Account) {
		return r, &fieldError{"account", "missing or not 1-128 letters, digits, '.', '_' or '-'"}
	}
	if !awsjson.ValidRegion(req.Region) {
		return r, &fieldError{"region", "missing or not 1-64 lowercase letters, digits or '-'"}
	}
	if !cfg.ServesRegion(req.Region) {
		return r, &fieldError{"region", "region " + clip(req.Region) + " is not served: not one of AWS's regions or the config's regions list" + suggest.DidYouMean(req.Region, cfg.Regions().Names())}
	}
	switch {
	case req.Action != "" && req.Category != "":
		return r, &fieldError{"action", "give action or category, not both"}
	case req.Action != "":
		if r.cat, ok = svc.CategoryOf(req.Action); !ok {
			return r, &fieldError{"action", "unknown action " + clip(req.Action) + " of service " + svc.Name + suggest.DidYouMean(req.Action, actionNames(svc))}
		}
	case req.Category != "":
		if r.cat, ok = svc.CategoryNamed(req.Category); !ok {
			return r, &fieldError{"category", "unknown category " + clip(req.Category) + " of service " + svc.Name + suggest.DidYouMean(req.Category, categoryNames(svc))}
		}
	default:
		return r, &fieldError{"action", "missing: give action or category"}
	}
	if req.Request != nil {
		if err := checkChargedTake(svc, req); err != nil {
			return r, err
		}
	}
	return g.resolveBucket(cfg, req, svc, r.cat)
}

// resolveBucket is the end of resolve, for a take whose service, account,
// region and category are valid: its bucket, limit and tokens.
func (g *Gateway) resolveBucket(cfg *quota.Config, req *TakeRequest, svc *quota.Service, cat *quota.Category) (resolved, error) {
	r := resolved{svc: svc, cat: cat}
	name := cat.Name
	if cat.PerAction { // each action its own bucket: EC2's
		if name = req.Category; req.Action != "" {
			name = svc.BucketName(cat, req.Action)
		}
	}
	r.key = quota.Key{Service: svc.Name, Account: req.Account, Region: req.Region, Category: name}
	r.limit, _ = g.limitOf(cfg, r.key)
	r.tokens = 1
	if req.Tokens != nil {
		r.tokens = *req.Tokens
	}
	if r.tokens < 0 {
		return r, &fieldError{"tokens", "must not be negative"}
	}
	if r.tokens > r.limit.Capacity() {
		return r, &fieldError{"tokens", fmt.Sprintf("%d exceeds the bucket's capacity %d: it can never be allowed", r.tokens, r.limit.Capacity())}
	}
	return r, nil
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
	if d > math.MaxInt64-time.Millisecond { // bucket.Never
		return int64(d / time.Millisecond)
	}
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
	h["Ratelimit-Policy"] = []string{name + ";q=" + strconv.FormatInt(r.limit.Capacity(), 10) + ";w=" + strconv.FormatInt(window, 10)}
	h["Ratelimit"] = []string{name + ";r=" + strconv.FormatInt(d.Remaining, 10) + ";t=" + strconv.FormatInt(int64(math.Ceil(d.ResetAfter.Seconds())), 10)}
}

// serveTake handles POST /v1/take.
func (g *Gateway) serveTake(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	cost := g.bodyCost(r)
	if !g.inFlight.acquire(cost) {
		g.shed(w, r)
		writeNativeError(w, http.StatusServiceUnavailable, "", g.overloadedMessage())
		return
	}
	defer g.inFlight.release(cost)
	body, release, err := g.readBody(w, r)
	defer release()
	if err != nil {
		writeNativeError(w, bodyErrorStatus(err), "", err.Error())
		return
	}
	var req TakeRequest
	if err := decodeStrict(body, &req); err != nil {
		writeFieldError(w, err)
		return
	}
	pol := g.policy.Load()
	res, err := g.resolve(pol.cfg, &req)
	if err != nil {
		writeFieldError(w, err)
		return
	}
	if req.Request != nil {
		g.serveChargedTake(w, r, pol, &req, res, start)
		return
	}
	d, err := g.limiter.Take(r.Context(), res.key.String(), res.limit, res.tokens)
	g.metrics.observe(pol.counters[res.cat], d.Allowed, err, time.Since(start))
	g.noteThrottled(res.key, d, err)
	if err != nil {
		g.logLimiterError(r, err, "request_id", w.Header().Get(awsjson.HeaderRequestID), "key", res.key.String())
		writeNativeError(w, http.StatusServiceUnavailable, "", "throttling store unavailable: "+err.Error())
		return
	}
	setRateLimitHeaders(w.Header(), res, d)
	status := http.StatusOK
	if !d.Allowed {
		status = http.StatusTooManyRequests
		w.Header().Set("Retry-After", strconv.FormatInt(retryAfterSeconds(d.RetryAfter), 10))
	}
	resp := toResponse(res, d)
	writeBody(w, status, append(resp.appendJSON(make([]byte, 0, 256)), '\n'))
}

// serveBatch handles POST /v1/take/batch: every take in one limiter call.
// The answer is 200 with one result per request; the batch is rejected
// whole, before any take, if any request is invalid or there are more
// than the gateway's MaxBatch.
//
// Memory: the body counts against the in-flight bound before it is read,
// and its takes (batchItemCost each) once they are counted; the decoder
// stops at the first take over MaxBatch.
func (g *Gateway) serveBatch(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	cost := g.bodyCost(r)
	if !g.inFlight.acquire(cost) {
		g.shed(w, r)
		writeNativeError(w, http.StatusServiceUnavailable, "", g.overloadedMessage())
		return
	}
	defer func() { g.inFlight.release(cost) }()
	bd := batchDecoders.Get().(*batchDecoder)
	defer putBatchDecoder(bd)
	bd.body.Reset()
	if err := g.readBodyInto(w, r, &bd.body); err != nil {
		writeNativeError(w, bodyErrorStatus(err), "", err.Error())
		return
	}
	if err := bd.decode(bd.body.Bytes(), g.maxBatch); err != nil {
		writeFieldError(w, err)
		return
	}
	if !bd.sawReq {
		writeNativeError(w, http.StatusBadRequest, "requests", "missing")
		return
	}
	n := len(bd.items)
	itemsCost := int64(n) * batchItemCost
	if !g.inFlight.acquire(itemsCost) {
		g.shed(w, r)
		writeNativeError(w, http.StatusServiceUnavailable, "", g.overloadedMessage())
		return
	}
	cost += itemsCost // released with the body's share
	pol := g.policy.Load()
	all := string(bd.arena) // every string of the batch, in one allocation
	items := slices.Grow(bd.resolved[:0], n)[:n]
	keyEnds := slices.Grow(bd.keyEnds[:0], n)[:n]
	keyBuf := slices.Grow(bd.keyBuf[:0], n*48) // a key is about 45 bytes
	// This batch's config's lookups only.
	clear(bd.kinds)
	bd.kinds = bd.kinds[:0]
	for i := range bd.items {
		req := bd.request(all, &bd.items[i])
		res, err := g.resolveBatched(pol.cfg, &req, &bd.kinds)
		if err != nil {
			var fe *fieldError
			if errors.As(err, &fe) {
				fe.field = "requests[" + strconv.Itoa(i) + "]." + fe.field
			}
			writeFieldError(w, err)
			return
		}
		items[i] = res
		keyBuf = res.key.AppendTo(keyBuf)
		keyEnds[i] = len(keyBuf)
	}
	keys := string(keyBuf) // every bucket key, in one allocation
	reqs := slices.Grow(bd.reqs[:0], n)[:n]
	for i, res := range items {
		start := 0
		if i > 0 {
			start = keyEnds[i-1]
		}
		reqs[i] = limiter.Request{Key: keys[start:keyEnds[i]], Limit: res.limit, Tokens: res.tokens}
	}
	out := slices.Grow(bd.out[:0], n)[:n]
	bd.resolved, bd.keyEnds, bd.keyBuf, bd.reqs, bd.out = items, keyEnds, keyBuf, reqs, out

	err := g.limiter.TakeBatch(r.Context(), reqs, out)
	elapsed := time.Since(start)
	if err != nil {
		for _, res := range items {
			pol.counters[res.cat].fail()
		}
		g.metrics.latency.Observe(elapsed.Seconds())
		g.logLimiterError(r, err, "request_id", w.Header().Get(awsjson.HeaderRequestID), "batch", n)
		writeNativeError(w, http.StatusServiceUnavailable, "", "throttling store unavailable: "+err.Error())
		return
	}
	// A result is about 200 bytes: grow once, not by doubling.
	answer := append(slices.Grow(bd.answer[:0], n*224+16), `{"results":[`...)
	frags := &bd.frags
	frags.reset()
	for i, res := range items {
		pol.counters[res.cat].count(out[i].Allowed)
		g.noteThrottled(res.key, out[i], nil)
		if i > 0 {
			answer = append(answer, ',')
		}
		answer = frags.appendResult(answer, &res, out[i])
	}
	answer = append(answer, "]}\n"...)
	bd.answer = answer
	g.metrics.latency.Observe(elapsed.Seconds())
	writeBody(w, http.StatusOK, answer)
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
