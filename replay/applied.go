package replay

// This file turns the Service Quotas values a tollgate has in force — the
// approved increases, as GET /v1/admin/servicequotas/applied lists them —
// into Options.Limits, with the arithmetic servicequotas applies them by.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/servicequotas"
)

// MaxAppliedSize bounds a file of applied values.
const MaxAppliedSize = 16 << 20

// ReadApplied reads the values in force as tollgate's admin API lists
// them: {"applied":[{"account","region","service_code","quota_code","value"}, …]}.
func ReadApplied(r io.Reader) ([]servicequotas.Applied, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxAppliedSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxAppliedSize {
		return nil, fmt.Errorf("longer than %d bytes", MaxAppliedSize)
	}
	var in struct {
		Applied *[]servicequotas.Applied `json:"applied"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("not the admin API's applied values: %w", err)
	}
	if in.Applied == nil {
		return nil, errors.New(`no "applied" list: want the answer of GET /v1/admin/servicequotas/applied`)
	}
	return *in.Applied, nil
}

// AppliedLimits returns the Options.Limits of applied values over cfg: an
// applied burst or rate replaces that part of the bucket's limit, as on a
// tollgate with those values in force. It fails on a value of a quota cfg
// does not have, or one that makes no valid limit.
func AppliedLimits(cfg *quota.Config, applied []servicequotas.Applied) (func(quota.Key, bucket.Limit) bucket.Limit, error) {
	c, err := servicequotas.NewCatalog(cfg)
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	for _, s := range c.Services() {
		names[s.Code] = s.Config
	}
	type pair struct{ burst, rate float64 }
	vals := map[quota.Key]*pair{}
	for i, a := range applied {
		q, ok := c.Quota(a.ServiceCode, a.QuotaCode)
		if !ok {
			return nil, fmt.Errorf("applied value %d: no quota %s of service %s in the config", i+1, a.QuotaCode, a.ServiceCode)
		}
		if !(a.Value >= 0) || (q.Kind == servicequotas.Burst && a.Value != math.Trunc(a.Value)) {
			return nil, fmt.Errorf("applied value %d: %v is not a %s", i+1, a.Value, q.Kind)
		}
		k := quota.Key{Service: names[a.ServiceCode], Account: a.Account, Region: a.Region, Category: q.Category}
		p := vals[k]
		if p == nil {
			p = &pair{}
			vals[k] = p
		}
		if q.Kind == servicequotas.Burst {
			p.burst = a.Value
		} else {
			p.rate = a.Value
		}
	}
	limits := make(map[quota.Key]bucket.Limit, len(vals))
	for k, p := range vals {
		l, _ := cfg.Limit(k)
		capacity, rate := l.Capacity(), l.RefillPerSecond()
		if p.burst > 0 {
			capacity = int64(p.burst)
		}
		if p.rate > 0 {
			rate = p.rate
		}
		nl, err := bucket.NewLimit(capacity, rate)
		if err != nil {
			return nil, fmt.Errorf("applied values of %s: %w", k, err)
		}
		limits[k] = nl
	}
	return func(k quota.Key, l bucket.Limit) bucket.Limit {
		if a, ok := limits[k]; ok {
			return a
		}
		return l
	}, nil
}
