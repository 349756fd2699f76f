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

// Served without the gateway in front, the API still refuses a region
// the config does not serve, as AWS does, and stores nothing for it; the
// admin endpoint that sets a value refuses it too.
func TestUnservedRegionStoresNothing(t *testing.T) {
	both(t, func(t *testing.T, redis bool) {
		a := newAPI(t, redis, servicequotas.Policy{})
		a.request(tenantKey, servicequotas.Burst, 200, "") // in us-east-1: listed below
		for _, region := range []string{"zz-evade-1", "us-east-7", "mars-north-1"} {
			if status, code := a.callIn(region, "AKIDANY", "RequestServiceQuotaIncrease", map[string]any{"ServiceCode": "ecs",
				"QuotaCode": servicequotas.QuotaCode("ecs", "cluster-read", servicequotas.Burst), "DesiredValue": 500.0}, nil); status != 400 || code != "InvalidSignatureException" {
				t.Errorf("%s: %d %s", region, status, code)
			}
			body := `{"account":"111122223333","region":"` + region + `","service_code":"ecs","quota_code":"` +
				servicequotas.QuotaCode("ecs", "cluster-read", servicequotas.Burst) + `","value":100}`
			if status := a.admin("PUT", "/v1/admin/servicequotas/applied", body, nil); status != 400 {
				t.Errorf("admin PUT applied in %s: %d", region, status)
			}
		}
		var list struct{ Requests []any }
		if status := a.admin("GET", "/v1/admin/servicequotas/requests", "", &list); status != 200 || len(list.Requests) != 1 {
			t.Errorf("requests after the made-up regions: %d %v", status, list.Requests)
		}
		var applied struct{ Applied []any }
		if status := a.admin("GET", "/v1/admin/servicequotas/applied", "", &applied); status != 200 || len(applied.Applied) != 0 {
			t.Errorf("applied values after the made-up regions: %d %v", status, applied.Applied)
		}
	})
}
