package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/awsjson"
	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/quota"
)

var (
	emptyJSON               = []byte("{}")
	contentTypeAWSJSONValue = []string{awsjson.ContentType}
	contentLength2          = []string{"2"}
)

// serveAWS handles the AWS JSON 1.1 protocol at "/".
func (g *Gateway) serveAWS(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := w.Header().Get(awsjson.HeaderRequestID)
	bodyRead := false
	defer func() {
		if !bodyRead {
			g.cutBody(w)
		}
	}()
	if r.Method != http.MethodPost && r.URL.Path != "/" {
		// Not an AWS call (they are POSTs, to / in every SDK): a path
		// nothing serves, as the native API answers one.
		writeNativeError(w, http.StatusNotFound, "", "no tollgate endpoint "+r.Method+" "+clip(r.URL.Path)+": AWS JSON calls are POST /, the native API is POST /v1/take, GET /v1/admin/ lists the admin endpoints")
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		awsjson.WriteError(w, http.StatusMethodNotAllowed, "UnknownOperationException",
			"AWS JSON requests are POSTs; "+r.Method+" "+r.URL.Path+" is not a tollgate endpoint")
		return
	}
	if e := awsjson.CheckHeaders(r.Header); e != nil {
		e.Write(w)
		return
	}
	pol := g.policy.Load()
	prefix, action, err := awsjson.ParseTarget(r.Header.Get("X-Amz-Target"))
	if err != nil {
		awsjson.WriteError(w, http.StatusBadRequest, "UnknownOperationException", err.Error())
		return
	}
	svc, ok := pol.cfg.ServiceByTargetPrefix(prefix)
	if !ok {
		awsjson.WriteError(w, http.StatusBadRequest, "UnknownOperationException",
			unknownTargetMessage(prefix))
		return
	}
	cat, ok := svc.CategoryOf(action)
	if !ok {
		// An operation newer than the table: with an upstream to answer
		// it, passed through under the service's default category.
		if _, proxied := pol.proxies[svc.Name]; proxied {
			cat, ok = svc.CategoryOrDefault(action)
		}
	}
	if !ok {
		awsjson.WriteError(w, http.StatusBadRequest, "UnknownOperationException",
			unknownOperationMessage(svc, action, pol.proxies[svc.Name] != nil))
		return
	}
	if ct := r.Header.Get("Content-Type"); !awsjson.IsContentType(ct) {
		awsjson.WriteError(w, http.StatusBadRequest, "SerializationException",
			"Content-Type must be "+awsjson.ContentType+", got "+clip(ct))
		return
	}
	var (
		cred   awsjson.Credential
		signed awsjson.Signed
		e      *awsjson.Error
	)
	if g.verifier != nil {
		// Parsed once: its scope is judged here, its signature checked
		// below.
		signed, e = awsjson.ParseSigned(r)
		cred = signed.Cred
	} else if cred, err = awsjson.CredentialOf(r); err != nil {
		e = awsjson.AuthError(err)
	}
	if e != nil {
		if g.verifier != nil {
			g.refuseEarly(w, r, e, cred.AccessKeyID)
			return
		}
		g.metrics.authFails.WithLabelValues(e.Code).Inc()
		e.Write(w)
		return
	}
	if svc.SigningName != "" && cred.Service != svc.SigningName {
		awsjson.WriteError(w, http.StatusBadRequest, "IncompleteSignatureException",
			"credential scope service "+clip(cred.Service)+" does not match "+strconv.Quote(svc.SigningName))
		return
	}
	if !pol.cfg.ServesRegion(cred.Region) {
		// Before the body is read or the signature checked: a region
		// nobody serves opens no bucket and reaches no API.
		// Answered at once, on a connection kept open: it costs no
		// reconnection to refuse.
		e := awsjson.RegionError(cred.Region)
		g.metrics.authFails.WithLabelValues(e.Code).Inc()
		e.Write(w)
		return
	}
	proven := false
	var pending awsjson.Pending
	if g.verifier != nil {
		// Before the body is read: a key that keeps failing from this
		// address, or a flood of unproven requests, costs no read and no
		// verification.
		if proven, e = g.verifier.AdmitSigned(&signed, r.RemoteAddr); e != nil {
			if e.Status == http.StatusServiceUnavailable {
				w.Header()["Retry-After"] = []string{"1"}
			}
			g.refuseEarly(w, r, e, cred.AccessKeyID)
			return
		}
		// Then as far as the headers allow: with X-Amz-Content-Sha256 the
		// signature itself, so that a client that cannot sign holds no
		// body budget, and the body is hashed as it arrives.
		if pending, e = g.verifier.VerifySigned(r, signed, r.RemoteAddr); e != nil {
			if g.log.Enabled(r.Context(), slog.LevelDebug) {
				g.log.Debug("signature refused", "request_id", id, "access_key", cred.AccessKeyID, "remote", r.RemoteAddr, "code", e.Code, "error", e.Message)
			}
			g.refuseEarly(w, r, e, cred.AccessKeyID)
			return
		}
		// A signature verified from the headers may use the in-flight
		// reserve kept for keys that proved themselves.
		proven = proven || pending.SignatureVerified()
		cred, r.Body = pending.Cred, pending.Body(r.Body)
	}
	hold := bodyHold{f: g.inFlight, h: holderOf(r.RemoteAddr, cred.AccessKeyID, proven)}
	defer hold.release()
	body, release, err := g.readBody(w, r, g.awsBodyLimit(prefix, action), &hold)
	defer release()
	if err != nil {
		if e := (*awsjson.Error)(nil); errors.As(err, &e) {
			// The body is not the one the verified headers signed.
			g.refuseSignature(w, r, id, cred, e)
			return
		}
		writeAWSBodyError(w, err, g)
		return
	}
	bodyRead = true
	if g.verifier != nil {
		// Before the body is judged: a client that cannot sign learns
		// nothing about what tollgate would make of its request.
		if _, e := g.verifier.VerifyBody(r, pending, body, r.RemoteAddr); e != nil {
			g.refuseSignature(w, r, id, cred, e)
			return
		}
	}
	if msg := awsjson.CheckBody(body); msg != "" {
		awsjson.WriteError(w, http.StatusBadRequest, "SerializationException", msg)
		return
	}

	account := pol.cfg.Account(cred.AccessKeyID)
	g.names.note(account)
	var charges []quota.Charge
	if svc.Weighted(action) {
		// Only actions whose cost depends on the body (ECS RunTask) have
		// it read: every other request keeps its one allocation-free take.
		if charges, err = svc.Charges(action, body, nil); err != nil {
			var re *quota.RequestError
			if errors.As(err, &re) {
				awsjson.WriteError(w, http.StatusBadRequest, re.Code, re.Message)
			} else {
				awsjson.WriteError(w, http.StatusBadRequest, "InvalidParameterException", err.Error())
			}
			return
		}
	}
	var (
		allowed bool
		d       bucket.Decision
		key     quota.Key
	)
	if len(charges) <= 1 {
		key = quota.Key{Service: svc.Name, Account: account, Region: cred.Region, Category: svc.BucketName(cat, action)}
		limit, _ := g.limitOf(pol.cfg, key)
		d, err = g.limiter.Take(r.Context(), key.String(), limit, 1)
		g.metrics.observe(pol.counters[cat], d.Allowed, err, time.Since(start))
		g.noteThrottled(key, d, err)
		allowed = d.Allowed
	} else {
		var c charged
		c, err = g.takeCharges(r.Context(), pol, svc, account, cred.Region, charges, start)
		allowed, d, key, cat = c.allowed, c.out[c.short], c.keys[c.short], charges[c.short].Category
	}
	if err != nil {
		g.logLimiterError(r, err, "request_id", id, "key", key.String())
		awsjson.WriteError(w, http.StatusInternalServerError, "InternalFailure", "throttling store unavailable")
		return
	}
	if g.log.Enabled(r.Context(), slog.LevelDebug) {
		g.log.Debug("decision", "request_id", id, "service", svc.Name, "action", action,
			"account", account, "region", cred.Region, "buckets", max(1, len(charges)), "allowed", allowed,
			"category", key.Category, "remaining", d.Remaining)
	}
	if !allowed {
		th := svc.ThrottleOf(cat)
		awsjson.WriteError(w, th.HTTPStatus, th.Code, th.Message)
		return
	}
	if proxy, ok := pol.proxies[svc.Name]; ok {
		// The transport may still read the body after the proxy returns
		// (an upstream that answers early), so it gets its own copy
		// rather than the pooled buffer.
		body = bytes.Clone(body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		w.Header().Del(awsjson.HeaderRequestID) // ModifyResponse sets one
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

// refuseSignature answers a request whose signature failed verification.
func (g *Gateway) refuseSignature(w http.ResponseWriter, r *http.Request, id string, cred awsjson.Credential, e *awsjson.Error) {
	g.metrics.authFails.WithLabelValues(e.Code).Inc()
	if g.log.Enabled(r.Context(), slog.LevelDebug) {
		g.log.Debug("signature refused", "request_id", id, "access_key", cred.AccessKeyID, "remote", r.RemoteAddr, "code", e.Code, "error", e.Message)
	}
	e.Write(w)
}

// clip quotes client input for an error message (see [awsjson.Clip]).
var clip = awsjson.Clip

// maxEcho is the most of a client's input an error message quotes.
const maxEcho = awsjson.MaxEcho

// unknownOperationMessage says why an operation was refused, and what
// would pass it: an upstream, or a default category.
func unknownOperationMessage(svc *quota.Service, action string, proxied bool) string {
	msg := "unknown operation " + clip(action) + " of service " + svc.Name
	switch {
	case !proxied:
		return msg + " (with an upstream: tollgate passes operations it does not know through under the service's default_category)"
	case svc.DefaultCategory == "":
		return msg + " (set the service's default_category to pass it through to the upstream)"
	}
	return msg
}

// writeAWSBodyError answers an AWS JSON request whose body could not be
// read, in AWS's dialect: 503 ServiceUnavailableException when the
// in-flight bound had no room for it, 408 RequestTimeoutException when
// it stopped arriving, else 413 or 400 SerializationException.
func writeAWSBodyError(w http.ResponseWriter, err error, g *Gateway) {
	status := bodyErrorStatus(w, err)
	switch status {
	case http.StatusServiceUnavailable:
		awsjson.WriteError(w, status, "ServiceUnavailableException", g.overloadedMessage())
	case http.StatusRequestTimeout:
		awsjson.WriteError(w, status, "RequestTimeoutException", g.slowMessage(err))
	default:
		awsjson.WriteError(w, status, "SerializationException", err.Error())
	}
}

// refuseEarly answers a request refused from its headers, before its
// body is read, when signatures are verified: a failed authentication
// (a missing, malformed or wrong signature, a key failing from its
// address) or a verification shed by the budget. Its
// connection is closed (net/http would otherwise read up to 256 KiB of
// the body first, at the client's pace), and its answer waits the failure
// delay (see Options.FailureDelay), so that a client reconnecting at once
// after each refusal comes back at most once a delay per connection. A
// refusal of an access key id (id, "" if none could be read) that has
// spent its failures from the address, or across addresses (a crowd with
// one made-up key), waits failingDelayFactor times as long: the refusals
// a persistent attacker costs fall further.
func (g *Gateway) refuseEarly(w http.ResponseWriter, r *http.Request, e *awsjson.Error, id string) {
	g.metrics.authFails.WithLabelValues(e.Code).Inc()
	w.Header().Set("Connection", "close")
	d := g.failureDelay
	if id != "" && g.verifier.Failing(id, r.RemoteAddr) {
		d *= failingDelayFactor
	}
	g.delayFailure(r.Context(), d)
	e.Write(w)
}

// failingDelayFactor: see refuseEarly.
const failingDelayFactor = 4

// delayFailure waits d (to half as long again, at random, so that
// clients refused together do not come back together)
// before a refusal is answered, unless MaxDelayed refusals wait already
// or ctx ends.
func (g *Gateway) delayFailure(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	select {
	case g.delayed <- struct{}{}:
	default:
		g.metrics.delayShed.Inc()
		return
	}
	defer func() { <-g.delayed }()
	t := time.NewTimer(d + rand.N(d/2+1))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
