package gateway

import (
	"errors"
	"net/http"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tollgate/tollgate/internal/yamlfield"
)

// serveBucket handles GET /v1/admin/bucket?service=&account=&region=&action=
// (or &category=): the bucket's state, without taking a token.
func (g *Gateway) serveBucket(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	zero := int64(0)
	req := TakeRequest{
		Service:  q.Get("service"),
		Account:  q.Get("account"),
		Region:   q.Get("region"),
		Action:   q.Get("action"),
		Category: q.Get("category"),
		Tokens:   &zero,
	}
	res, err := resolve(g.policy.Load().cfg, &req)
	if err != nil {
		writeFieldError(w, err)
		return
	}
	d, err := g.limiter.Take(r.Context(), res.key.String(), res.limit, 0)
	if err != nil {
		writeNativeError(w, http.StatusServiceUnavailable, "", "throttling store unavailable: "+err.Error())
		return
	}
	setRateLimitHeaders(w.Header(), res, d)
	resp := toResponse(res, d)
	body, _ := jsontext.AppendQuote([]byte(`{"key":`), res.key.String())
	body = append(body, `,"bucket":`...)
	body = append(resp.appendJSON(body), "}\n"...)
	writeBody(w, http.StatusOK, body)
}

// reloadResponse is the answer to POST /v1/admin/reload.
type reloadResponse struct {
	Reloaded bool     `json:"reloaded"`
	Errors   []string `json:"errors,omitempty"`
}

// serveReload handles POST /v1/admin/reload.
func (g *Gateway) serveReload(w http.ResponseWriter, r *http.Request) {
	if err := g.Reload(); err != nil {
		var errs yamlfield.Errors
		resp := reloadResponse{}
		if errors.As(err, &errs) {
			for _, e := range errs {
				resp.Errors = append(resp.Errors, e.Error())
			}
		} else {
			resp.Errors = []string{err.Error()}
		}
		writeJSON(w, http.StatusUnprocessableEntity, resp)
		return
	}
	writeJSON(w, http.StatusOK, reloadResponse{Reloaded: true})
}
