package gateway

import (
	"context"
	"errors"
	"net/http"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tollgate/tollgate/awsjson"
	"github.com/tollgate/tollgate/internal/yamlfield"
)

// serveBucket handles GET /v1/admin/bucket?service=&account=&region=&action=
// (or &category=): the bucket's state, without taking a token.
func (g *Gateway) serveBucket(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	zero := int64(0)
	req := TakeRequest{
		Service:  q.Get("service"),
		Account:  g.names.account(q.Get("account")),
		Region:   q.Get("region"),
		Action:   q.Get("action"),
		Category: q.Get("category"),
		Tokens:   &zero,
	}
	res, err := g.resolve(g.policy.Load().cfg, &req)
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
	body, _ = jsontext.AppendQuote(append(body, `,"account_id":`...), awsjson.AccountID(res.key.Account))
	body = append(body, `,"bucket":`...)
	body = append(resp.appendJSON(body), "}\n"...)
	writeBody(w, http.StatusOK, body)
}

// reloadResponse is the answer to POST /v1/admin/reload: the parts that
// were reloaded ("config", "rls"), and one line per problem of those that
// kept their old state.
type reloadResponse struct {
	Reloaded []string `json:"reloaded"`
	Errors   []string `json:"errors,omitempty"`
}

// serveReload handles POST /v1/admin/reload: 200 when every part
// reloaded, else 422 naming the problems (the parts that did reload are
// still listed).
func (g *Gateway) serveReload(w http.ResponseWriter, r *http.Request) {
	reload := g.adminReload
	if reload == nil {
		reload = func(context.Context) ([]string, error) {
			if err := g.Reload(); err != nil {
				return nil, err
			}
			return []string{"config"}, nil
		}
	}
	reloaded, err := reload(r.Context())
	resp := reloadResponse{Reloaded: reloaded}
	if resp.Reloaded == nil {
		resp.Reloaded = []string{}
	}
	if err != nil {
		resp.Errors = errorLines(err)
		writeJSON(w, http.StatusUnprocessableEntity, resp)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// errorLines is one line per problem of err: each error of a join, and
// each located problem of a config file's errors (their lines name the
// file).
func errorLines(err error) []string {
	var errs yamlfield.Errors
	if _, isFile := err.(yamlfield.Errors); !isFile {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			var lines []string
			for _, e := range j.Unwrap() {
				lines = append(lines, errorLines(e)...)
			}
			return lines
		}
	}
	if errors.As(err, &errs) {
		lines := make([]string, 0, len(errs))
		for _, e := range errs {
			lines = append(lines, e.Error())
		}
		return lines
	}
	return []string{err.Error()}
}
