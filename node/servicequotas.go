package node

import (
	"crypto/tls"
	"log/slog"
	"maps"
	"net/http"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/liveview"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/servicequotas"
	"github.com/tollgate/tollgate/state/bolt"
)

// newServiceQuotas builds the Service Quotas API that answers the
// servicequotas service's allowed requests and whose approved values are
// the gateway's Limits: in memory, or in the Redis the store settings
// name, so that every node applies them and they survive restarts. Built
// once per process; a reload calls SetConfig (store.cache's
// service_quotas_requests, which bounds the requests held in memory over
// durable, is read here, once: at the next start). The returned function
// closes its Redis client.
func newServiceQuotas(cfg *config.Config, st config.Store, durable *bolt.DB, tlsConfig func(string) *tls.Config, log *slog.Logger, usage func(account, region string) []servicequotas.BucketUse) (*servicequotas.Service, func(), error) {
	client, closeFn, err := storeClient(st, tlsConfig)
	if err != nil {
		return nil, nil, err
	}
	s, err := servicequotas.New(servicequotas.Options{Config: cfg.Quota, Policy: QuotaPolicy(cfg.ServiceQuotas), Log: log, Redis: client, Durable: durable, Usage: usage,
		CacheRequests: st.Cache.ServiceQuotasRequests})
	if err != nil {
		closeFn()
		return nil, nil, err
	}
	return s, closeFn, nil
}

// bucketUses is one account's utilisation in a region over the last hour,
// as rec saw this node's decisions, for the utilization report. A bucket
// counts as throttled only when the count's lower bound is above zero.
func bucketUses(rec *liveview.Recorder, account, region string) []servicequotas.BucketUse {
	if rec == nil {
		return nil
	}
	v := rec.Usage(0, func(k quota.Key) bool { return k.Account == account && k.Region == region })
	out := make([]servicequotas.BucketUse, 0, len(v.Keys))
	for _, u := range v.Keys {
		out = append(out, servicequotas.BucketUse{Service: u.Key.Service, Category: u.Key.Category,
			Throttled: u.Throttled > u.ErrorBound, Peak: u.Peak})
	}
	return out
}

// QuotaPolicy carries the config's service_quotas section into the API's
// policy, as serve and `tollgate check` use it.
func QuotaPolicy(sq config.ServiceQuotas) servicequotas.Policy {
	var p servicequotas.Policy
	bounds := func(b config.ApprovalBounds) servicequotas.Bounds {
		return servicequotas.Bounds{AutoApproveFactor: b.AutoApproveFactor, AutoApproveUpTo: b.AutoApproveUpTo, Max: b.Max}
	}
	for _, a := range sq.Approval {
		p.Rules = append(p.Rules, servicequotas.Rule{Service: a.Service, Category: a.Category,
			AutoApproveFactor: a.AutoApproveFactor, MaxFactor: a.MaxFactor, Burst: bounds(a.Burst), Rate: bounds(a.Rate)})
	}
	return p
}

// withAdmin returns h and more in one map.
func withAdmin(h map[string]http.Handler, more map[string]http.Handler) map[string]http.Handler {
	out := maps.Clone(h)
	maps.Copy(out, more)
	return out
}
