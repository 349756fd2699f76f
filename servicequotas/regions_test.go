package servicequotas_test

import (
	"testing"

	"github.com/tollgate/tollgate/awsjson"
	"github.com/tollgate/tollgate/servicequotas"
)

// The bound on one account's open requests counts the account in all its
// regions together: a tenant (mapped) and an unmapped key each open
// MaxOpenPerAccount requests, one per region, and the next, in yet
// another region, is refused; an unmapped key so refused leaves the next
// unmapped key served. Memory and Redis alike.
func TestOpenRequestsBoundSpansRegions(t *testing.T) {
	both(t, func(t *testing.T, redis bool) {
		a := newAPI(t, redis, servicequotas.Policy{}) // every request stays PENDING
		regions := awsjson.AWSRegions().Names()
		if len(regions) <= servicequotas.MaxOpenPerAccount {
			t.Fatalf("%d regions: too few to spread %d requests", len(regions), servicequotas.MaxOpenPerAccount+1)
		}
		ask := func(key, region string) string {
			var out requested
			_, code := a.callIn(region, key, "RequestServiceQuotaIncrease", map[string]any{"ServiceCode": "ecs",
				"QuotaCode": servicequotas.QuotaCode("ecs", "cluster-read", servicequotas.Burst), "DesiredValue": 500.0}, &out)
			if code == "" && out.RequestedQuota.Status != "PENDING" {
				t.Fatalf("%s in %s: %s, want PENDING", key, region, out.RequestedQuota.Status)
			}
			return code
		}
		for _, key := range []string{tenantKey, "AKIDROAMING"} {
			for i := range servicequotas.MaxOpenPerAccount {
				if code := ask(key, regions[i]); code != "" {
					t.Fatalf("%s: request %d, in %s: %s", key, i, regions[i], code)
				}
			}
			if code := ask(key, regions[servicequotas.MaxOpenPerAccount]); code != "QuotaExceededException" {
				t.Errorf("%s: request %d, in a region of its own (%s): %q, want QuotaExceededException", key,
					servicequotas.MaxOpenPerAccount+1, regions[servicequotas.MaxOpenPerAccount], code)
			}
		}
		if code := ask("AKIDNEXT", "us-east-1"); code != "" {
			t.Errorf("the next unmapped key: %s", code)
		}
	})
}
