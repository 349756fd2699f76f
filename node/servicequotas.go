package node

import (
	"crypto/tls"
	"log/slog"
	"maps"
	"net/http"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/servicequotas"
)

// newServiceQuotas builds the Service Quotas API that answers the
// servicequotas service's allowed requests and whose approved values are
// the gateway's Limits: in memory, or in the Redis the store settings
// name, so that every node applies them and they survive restarts. Built
// once per process; a reload calls SetConfig. The returned function
// closes its Redis client.
func newServiceQuotas(cfg *config.Config, st config.Store, tlsConfig func(string) *tls.Config, log *slog.Logger) (*servicequotas.Service, func(), error) {
	client, closeFn, err := storeClient(st, tlsConfig)
	if err != nil {
		return nil, nil, err
	}
	s, err := servicequotas.New(servicequotas.Options{Config: cfg.Quota, Policy: quotaPolicy(cfg.ServiceQuotas), Log: log, Redis: client})
	if err != nil {
		closeFn()
		return nil, nil, err
	}
	return s, closeFn, nil
}

// quotaPolicy carries the config's service_quotas section into the API's
// policy.
func quotaPolicy(sq config.ServiceQuotas) servicequotas.Policy {
	var p servicequotas.Policy
	for _, a := range sq.Approval {
		p.Rules = append(p.Rules, servicequotas.Rule{Service: a.Service, Category: a.Category,
			AutoApproveFactor: a.AutoApproveFactor, AutoApproveUpTo: a.AutoApproveUpTo, Max: a.Max})
	}
	return p
}

// withAdmin returns h and more in one map.
func withAdmin(h map[string]http.Handler, more map[string]http.Handler) map[string]http.Handler {
	out := maps.Clone(h)
	maps.Copy(out, more)
	return out
}
