package servicequotas

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/awsjson"
)

// AdminHandlers are the operator's endpoints by mux pattern, for the
// gateway's Options.AdminHandlers (behind its bearer token):
//
//	GET  /v1/admin/servicequotas/requests                    requests, newest first, one page:
//	     ?account=A&status=S[,S…]&limit=N&next_token=T       filters (status one or more); limit 1–500,
//	                                                         default 100; next_token from the last page
//	POST /v1/admin/servicequotas/requests/{id}/approve       {"reason": "…"}: APPROVED, applied at once
//	POST /v1/admin/servicequotas/requests/{id}/deny          {"reason": "…"}: DENIED
//	GET  /v1/admin/servicequotas/applied                     the values in force, by account
//	PUT  /v1/admin/servicequotas/applied                     {"account","region","service_code","quota_code","value"}:
//	                                                         set a value (a decrease too); value 0 goes back to the config's
func (s *Service) AdminHandlers() map[string]http.Handler {
	return map[string]http.Handler{
		"GET /v1/admin/servicequotas/requests":               helped{s.adminList, "quota increase requests, newest first, a page at a time: ?account=&status=PENDING[,APPROVED…]&limit=1-500 (default 100)&next_token= (the last page's)"},
		"POST /v1/admin/servicequotas/requests/{id}/approve": helped{s.adminDecide(StatusApproved), `approve a request, body {"reason": "…"}: APPROVED and applied at once`},
		"POST /v1/admin/servicequotas/requests/{id}/deny":    helped{s.adminDecide(StatusDenied), `deny a request, body {"reason": "…"}: DENIED`},
		"GET /v1/admin/servicequotas/applied":                helped{s.adminApplied, "the quota values in force, by account, region and quota"},
		"PUT /v1/admin/servicequotas/applied":                helped{s.adminSet, `set a value, body {"account","region","service_code","quota_code","value"} (a decrease too; 0 goes back to the config's)`},
	}
}

// helped is an admin handler with its line of help for the gateway's
// index of admin endpoints (its Help method).
type helped struct {
	http.HandlerFunc
	help string
}

// Help says what the endpoint does.
func (h helped) Help() string { return h.help }

// AdminRequest is a request as the admin endpoints show it.
type AdminRequest struct {
	Request
	// AccountID is the request's account as the API's answers show it
	// (awsjson.AccountID); Account is the account the admin endpoints and
	// the buckets name.
	AccountID string  `json:"account_id"`
	QuotaName string  `json:"quota_name"`
	Current   float64 `json:"current_value"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func adminError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// The admin listing's page size: by default and at most.
const (
	DefaultAdminPage = 100
	MaxAdminPage     = 500
)

// AdminPage is one page of the admin listing.
type AdminPage struct {
	// APIServed is false when no service of the config answers the
	// Service Quotas API (no `preset: servicequotas`): no tenant can ask.
	APIServed bool           `json:"api_served"`
	Requests  []AdminRequest `json:"requests"`
	// NextToken, when set, is the next_token of the next page.
	NextToken string `json:"next_token,omitempty"`
}

// adminFilter reads the listing's query.
func adminFilter(q url.Values) (pageFilter, error) {
	f := pageFilter{account: q.Get("account"), limit: DefaultAdminPage}
	if len(f.account) > 256 {
		return f, errors.New("account: at most 256 bytes")
	}
	if st := q.Get("status"); st != "" {
		f.statuses = map[string]bool{}
		for _, x := range strings.Split(st, ",") {
			if !statuses[x] {
				return f, errors.New("unknown status " + awsjson.Clip(x))
			}
			f.statuses[x] = true
		}
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > MaxAdminPage {
			return f, fmt.Errorf("limit: want 1 to %d, got %s", MaxAdminPage, awsjson.Clip(l))
		}
		f.limit = n
	}
	if t := q.Get("next_token"); t != "" {
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil || n < 1 {
			return f, errors.New("next_token: not a token of this listing: " + awsjson.Clip(t))
		}
		f.before = n
	}
	return f, nil
}

func (s *Service) adminList(w http.ResponseWriter, r *http.Request) {
	f, err := adminFilter(r.URL.Query())
	if err != nil {
		adminError(w, http.StatusBadRequest, err.Error())
		return
	}
	rs, next, err := s.be.page(r.Context(), f)
	if err != nil {
		adminError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	c := s.Catalog()
	keys := make([]string, len(rs))
	for i := range rs {
		keys[i] = rs[i].applied()
	}
	vals, err := s.be.values(r.Context(), keys)
	if err != nil {
		adminError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	out := AdminPage{APIServed: s.served.Load(), Requests: make([]AdminRequest, 0, len(rs))}
	if next > 0 {
		out.NextToken = strconv.FormatInt(next, 10)
	}
	for _, req := range rs {
		ar := AdminRequest{Request: req, AccountID: awsjson.AccountID(req.Account)}
		if q, ok := c.Quota(req.ServiceCode, req.QuotaCode); ok {
			ar.QuotaName = q.Name
			ar.Current = s.value(c, vals, q, awsjson.Identity{Account: req.Account, Region: req.Region})
		}
		out.Requests = append(out.Requests, ar)
	}
	writeJSON(w, http.StatusOK, out)
}

func readReason(r *http.Request) (string, error) {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, 4096))
	if err != nil {
		return "", err
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return "", nil
	}
	var in struct {
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return "", err
	}
	return in.Reason, nil
}

func (s *Service) adminDecide(status string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if id == "" { // a mux that does not set path values
			rest := strings.TrimPrefix(r.URL.Path, "/v1/admin/servicequotas/requests/")
			id, _, _ = strings.Cut(rest, "/")
		}
		reason, err := readReason(r)
		if err != nil {
			adminError(w, http.StatusBadRequest, "body: want {\"reason\": \"…\"}: "+awsjson.ClipMessage(err.Error()))
			return
		}
		got, err := s.decide(r.Context(), id, status, reason)
		switch {
		case errors.Is(err, errNotFound):
			adminError(w, http.StatusNotFound, "no request "+awsjson.Clip(id))
		case errors.Is(err, errNotPending):
			adminError(w, http.StatusConflict, "request "+id+" is "+got.Status+", not PENDING")
		case err != nil:
			adminError(w, http.StatusServiceUnavailable, err.Error())
		default:
			writeJSON(w, http.StatusOK, got)
		}
	}
}

// Applied is one value in force.
type Applied struct {
	Account     string  `json:"account"`
	Region      string  `json:"region"`
	ServiceCode string  `json:"service_code"`
	QuotaCode   string  `json:"quota_code"`
	QuotaName   string  `json:"quota_name,omitempty"`
	Value       float64 `json:"value"`
}

func (s *Service) adminApplied(w http.ResponseWriter, r *http.Request) {
	_, vals, err := s.be.applied(r.Context())
	if err != nil {
		adminError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	c := s.Catalog()
	out := []Applied{}
	for k, v := range vals {
		a, reg, svc, code, _ := splitAppliedKey(k)
		ap := Applied{Account: a, Region: reg, ServiceCode: svc, QuotaCode: code, Value: v}
		if q, ok := c.Quota(svc, code); ok {
			ap.QuotaName = q.Name
		}
		out = append(out, ap)
	}
	sortApplied(out)
	writeJSON(w, http.StatusOK, map[string]any{"applied": out})
}

func (s *Service) adminSet(w http.ResponseWriter, r *http.Request) {
	var in Applied
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, 4096))
	if err == nil {
		err = json.Unmarshal(body, &in)
	}
	if err != nil {
		adminError(w, http.StatusBadRequest, "body: "+awsjson.ClipMessage(err.Error()))
		return
	}
	c := s.Catalog()
	q, ok := c.Quota(in.ServiceCode, in.QuotaCode)
	switch {
	case !ok:
		adminError(w, http.StatusNotFound, "no quota "+awsjson.Clip(in.QuotaCode)+" of service "+awsjson.Clip(in.ServiceCode))
		return
	case in.Account == "" || strings.Contains(in.Account, "|") || !awsjson.ValidRegion(in.Region):
		adminError(w, http.StatusBadRequest, "account and region are required")
		return
	case !c.Config().ServesRegion(in.Region):
		adminError(w, http.StatusBadRequest, "region "+awsjson.Clip(in.Region)+" is not served: not one of AWS's regions or the config's regions list")
		return
	}
	if in.Value != 0 {
		v := in.Value
		if err := validDesired(q, &v); err != nil {
			adminError(w, http.StatusBadRequest, err.(*awsjson.Error).Message)
			return
		}
	}
	if err := s.be.set(r.Context(), appliedKey(in.Account, in.Region, in.ServiceCode, in.QuotaCode), in.Value); err != nil {
		adminError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	s.refreshAfter(r.Context())
	in.QuotaName = q.Name
	writeJSON(w, http.StatusOK, in)
}
