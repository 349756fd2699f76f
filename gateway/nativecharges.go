package gateway

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/awsjson"
	"github.com/tollgate/tollgate/quota"
)

// checkChargedTake validates a take with a request body: it names an
// action whose cost depends on the body, and no tokens.
func checkChargedTake(svc *quota.Service, req *TakeRequest) error {
	switch {
	case req.Action == "":
		return &fieldError{"request", "needs an action, not a category"}
	case !svc.Weighted(req.Action):
		return &fieldError{"request", "the cost of " + svc.Name + " " + req.Action + " does not depend on its request body; give tokens instead"}
	case req.Tokens != nil:
		return &fieldError{"tokens", "give tokens or request, not both: the request decides the tokens"}
	}
	return nil
}

// serveChargedTake answers a /v1/take with a request body: every bucket
// the action takes from, all or none.
func (g *Gateway) serveChargedTake(w http.ResponseWriter, r *http.Request, pol *policy, req *TakeRequest, res resolved, start time.Time) {
	charges, err := res.svc.Charges(req.Action, req.Request, nil)
	if err != nil {
		var re *quota.RequestError
		if errors.As(err, &re) {
			writeNativeError(w, http.StatusBadRequest, "request", "request: "+re.Code+": "+re.Message)
		} else {
			writeFieldError(w, err)
		}
		return
	}
	c, err := g.takeCharges(r.Context(), pol, res.svc, req.Account, req.Region, charges, start)
	if err != nil {
		g.logLimiterError(r, err, "request_id", w.Header().Get(awsjson.HeaderRequestID), "key", c.keys[0].String())
		writeNativeError(w, http.StatusServiceUnavailable, "", "throttling store unavailable: "+err.Error())
		return
	}
	buckets := make([]TakeResponse, len(charges))
	for i, ch := range charges {
		buckets[i] = toResponse(resolved{svc: res.svc, cat: ch.Category, key: c.keys[i], limit: c.limits[i]}, c.out[i])
	}
	deciding := resolved{svc: res.svc, cat: charges[c.short].Category, key: c.keys[c.short], limit: c.limits[c.short]}
	resp := ChargedTakeResponse{TakeResponse: buckets[c.short], Buckets: buckets}
	setRateLimitHeaders(w.Header(), deciding, c.out[c.short])
	status := http.StatusOK
	if !c.allowed {
		status = http.StatusTooManyRequests
		w.Header().Set("Retry-After", strconv.FormatInt(retryAfterSeconds(c.out[c.short].RetryAfter), 10))
	}
	writeJSON(w, status, resp)
}
