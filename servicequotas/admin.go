package servicequotas

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/tollgate/tollgate/awsjson"
)

// AdminHandlers are the operator's endpoints by mux pattern, for the
// gateway's Options.AdminHandlers (behind its bearer token):
//
//	GET  /v1/admin/servicequotas/requests[?status=PENDING]  every account's requests, newest first
//	POST /v1/admin/servicequotas/requests/{id}/approve       {"reason": "…"}: APPROVED, applied at once
//	POST /v1/admin/servicequotas/requests/{id}/deny          {"reason": "…"}: DENIED
//	GET  /v1/admin/servicequotas/applied                     the values in force, by account
//	PUT  /v1/admin/servicequotas/applied                     {"account","region","service_code","quota_code","value"}:
//	                                                         set a value (a decrease too); value 0 goes back to the config's
func (s *Service) AdminHandlers() map[string]http.Handler {
	return map[string]http.Handler{
		"GET /v1/admin/servicequotas/requests":               helped{s.adminList, "every account's quota increase requests, newest first; ?status=PENDING for those waiting"},
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

func (s *Service) adminList(w http.ResponseWriter, r *http.Request) {
	status := r.URL.Query().Get("status")
	if status != "" && !statuses[status] {
		adminError(w, http.StatusBadRequest, "unknown status "+awsjson.Clip(status))
		return
	}
	st, err := s.be.load(r.Context())
	if err != nil {
		adminError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	c := s.Catalog()
	out := []AdminRequest{}
	for i := len(st.Requests) - 1; i >= 0; i-- {
		req := st.Requests[i]
		if status != "" && req.Status != status {
			continue
		}
		ar := AdminRequest{Request: req, AccountID: awsjson.AccountID(req.Account)}
		if q, ok := c.Quota(req.ServiceCode, req.QuotaCode); ok {
			ar.QuotaName = q.Name
			ar.Current = s.value(c, st, q, awsjson.Identity{Account: req.Account, Region: req.Region})
		}
		out = append(out, ar)
	}
	writeJSON(w, http.StatusOK, map[string]any{"requests": out})
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

var errNotPending = errors.New("not pending")

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

var errNotFound = errors.New("not found")

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
	st, err := s.be.load(r.Context())
	if err != nil {
		adminError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	c := s.Catalog()
	out := []Applied{}
	for k, v := range st.Applied {
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
	}
	if in.Value != 0 {
		v := in.Value
		if err := validDesired(q, &v); err != nil {
			adminError(w, http.StatusBadRequest, err.(*awsjson.Error).Message)
			return
		}
	}
	st, err := s.be.update(r.Context(), func(st *state) error {
		k := appliedKey(in.Account, in.Region, in.ServiceCode, in.QuotaCode)
		if in.Value == 0 {
			delete(st.Applied, k)
		} else {
			st.Applied[k] = in.Value
		}
		return nil
	})
	if err != nil {
		adminError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	s.install(st)
	in.QuotaName = q.Name
	writeJSON(w, http.StatusOK, in)
}
