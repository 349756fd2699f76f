package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tollgate/tollgate/awsjson"
	"github.com/tollgate/tollgate/quota"
)

const contentTypeAWSJSON = "application/x-amz-json-1.1"

// awsError is the body of an AWS JSON 1.1 error.
type awsError struct {
	Type    string `json:"__type"`
	Message string `json:"message"`
}

// writeAWSError answers in the AWS JSON 1.1 error shape: the code in
// X-Amzn-ErrorType and __type, in exact case, as the SDKs match it.
func writeAWSError(w http.ResponseWriter, status int, code, message string) {
	h := w.Header()
	h.Set("Content-Type", contentTypeAWSJSON)
	h.Set("X-Amzn-ErrorType", code)
	body, _ := json.Marshal(awsError{Type: code, Message: message})
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

var (
	emptyJSON               = []byte("{}")
	contentTypeAWSJSONValue = []string{contentTypeAWSJSON}
	contentLength2          = []string{"2"}
)

// serveAWS handles the AWS JSON 1.1 protocol at "/".
func (g *Gateway) serveAWS(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := w.Header().Get(headerRequestID)
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeAWSError(w, http.StatusMethodNotAllowed, "UnknownOperationException",
			"AWS JSON requests are POSTs; "+r.Method+" "+r.URL.Path+" is not a tollgate endpoint")
		return
	}
	// One header each: with two, a proxy in front and tollgate could read
	// different operations or identities from one request.
	if len(r.Header["X-Amz-Target"]) > 1 {
		writeAWSError(w, http.StatusBadRequest, "UnknownOperationException", "more than one X-Amz-Target header")
		return
	}
	if len(r.Header["Authorization"]) > 1 {
		writeAWSError(w, http.StatusBadRequest, "IncompleteSignatureException", "more than one Authorization header")
		return
	}
	pol := g.policy.Load()
	prefix, action, err := awsjson.ParseTarget(r.Header.Get("X-Amz-Target"))
	if err != nil {
		writeAWSError(w, http.StatusBadRequest, "UnknownOperationException", err.Error())
		return
	}
	svc, ok := pol.cfg.ServiceByTargetPrefix(prefix)
	if !ok {
		writeAWSError(w, http.StatusBadRequest, "UnknownOperationException",
			"unknown X-Amz-Target prefix "+clip(prefix))
		return
	}
	cat, ok := svc.CategoryOf(action)
	if !ok {
		writeAWSError(w, http.StatusBadRequest, "UnknownOperationException",
			"unknown operation "+action+" of service "+svc.Name)
		return
	}
	if ct := r.Header.Get("Content-Type"); !isAWSJSON(ct) {
		writeAWSError(w, http.StatusBadRequest, "SerializationException",
			"Content-Type must be "+contentTypeAWSJSON+", got "+clip(ct))
		return
	}
	cred, err := awsjson.ParseAuthorization(r.Header.Get("Authorization"))
	if err != nil {
		code := "IncompleteSignatureException"
		if errors.Is(err, awsjson.ErrMissingAuth) {
			code = "MissingAuthenticationTokenException"
		}
		writeAWSError(w, http.StatusBadRequest, code, err.Error())
		return
	}
	if svc.SigningName != "" && cred.Service != svc.SigningName {
		writeAWSError(w, http.StatusBadRequest, "IncompleteSignatureException",
			"credential scope service "+clip(cred.Service)+" does not match "+strconv.Quote(svc.SigningName))
		return
	}
	cost := g.bodyCost(r)
	if !g.inFlight.acquire(cost) {
		g.shed(w, r)
		writeAWSError(w, http.StatusServiceUnavailable, "ServiceUnavailableException", g.overloadedMessage())
		return
	}
	defer g.inFlight.release(cost)
	body, release, err := g.readBody(w, r)
	defer release()
	if err != nil {
		writeAWSError(w, bodyErrorStatus(err), "SerializationException", err.Error())
		return
	}
	if msg := checkAWSBody(body); msg != "" {
		writeAWSError(w, http.StatusBadRequest, "SerializationException", msg)
		return
	}

	account := pol.cfg.Account(cred.AccessKeyID)
	key := quota.Key{Service: svc.Name, Account: account, Region: cred.Region, Category: cat.Name}
	limit, _ := pol.cfg.Limit(key)
	d, err := g.limiter.Take(r.Context(), key.String(), limit, 1)
	g.metrics.observe(pol.counters[cat], d.Allowed, err, time.Since(start))
	g.noteThrottled(key, d, err)
	if err != nil {
		g.logLimiterError(r, err, "request_id", id, "key", key.String())
		writeAWSError(w, http.StatusInternalServerError, "InternalFailure", "throttling store unavailable")
		return
	}
	if g.log.Enabled(r.Context(), slog.LevelDebug) {
		g.log.Debug("decision", "request_id", id, "service", svc.Name, "action", action,
			"account", account, "region", cred.Region, "allowed", d.Allowed, "remaining", d.Remaining)
	}
	if !d.Allowed {
		th := svc.ThrottleOf(cat)
		writeAWSError(w, th.HTTPStatus, th.Code, th.Message)
		return
	}
	if proxy, ok := pol.proxies[svc.Name]; ok {
		// The transport may still read the body after the proxy returns
		// (an upstream that answers early), so it gets its own copy
		// rather than the pooled buffer.
		body = bytes.Clone(body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		w.Header().Del(headerRequestID) // ModifyResponse sets one
		proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id)))
		return
	}
	if pool := pol.pools[svc.Name]; pool != nil {
		servePool(pool, w, r, body)
		return
	}
	if handler, ok := g.handlers[svc.Name]; ok {
		r.Body = io.NopCloser(bytes.NewReader(bytes.Clone(body)))
		r.ContentLength = int64(len(body))
		r.Header.Set(HeaderAccount, account)
		handler.ServeHTTP(w, r)
		return
	}
	h := w.Header()
	h["Content-Type"] = contentTypeAWSJSONValue
	h["Content-Length"] = contentLength2
	w.WriteHeader(http.StatusOK)
	w.Write(emptyJSON)
}

// checkAWSBody returns why an AWS JSON 1.1 body is unacceptable, or "".
// The body must be empty or one JSON object under RFC 7493 (I-JSON): no
// duplicate member names and no invalid UTF-8, which parsers resolve
// differently (first or last wins, replacement characters), so the
// upstream could act on another request than the one tollgate judged.
func checkAWSBody(body []byte) string {
	if len(body) == 0 {
		return ""
	}
	if jsontext.Value(body).IsValid() {
		if bytes.TrimLeft(body, " \t\r\n")[0] != '{' {
			return "request body is not a JSON object"
		}
		return ""
	}
	// The slow path, for the message only.
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	_, err := dec.ReadValue()
	if err == nil {
		_, err = dec.ReadToken()
		if err == nil || err == io.EOF {
			return "request body is more than one JSON value"
		}
	}
	var synErr *jsontext.SyntacticError
	if errors.As(err, &synErr) {
		return "request body is not valid JSON at byte " + strconv.FormatInt(synErr.ByteOffset, 10) + ": " + clipMessage(synErr.Err.Error())
	}
	return "request body is not valid JSON: " + clipMessage(err.Error())
}

// clip quotes client input for an error message (see [awsjson.Clip]).
var clip = awsjson.Clip

// maxEcho is the most of a client's input an error message quotes.
const maxEcho = awsjson.MaxEcho

// clipMessage shortens an error text that may quote client input.
func clipMessage(s string) string {
	const max = 2 * maxEcho
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "") + "…"
}

// isAWSJSON reports whether a Content-Type is AWS JSON 1.1, parameters
// (such as a charset) allowed.
func isAWSJSON(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.EqualFold(strings.TrimSpace(mt), contentTypeAWSJSON)
}
