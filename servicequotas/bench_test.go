package servicequotas_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/awsjson"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/servicequotas"
)

// BenchmarkWriteBesideForeignRequests: a tenant's RequestServiceQuotaIncrease
// (then its denial, so the tenant stays under its 20 open) on an empty
// store and beside 25,000 open requests of 1,250 other accounts, in memory
// and on Redis. It reports the p99 of the request itself: what one tenant
// writes must not cost another (issue 28: within 2× of the empty store).
func BenchmarkWriteBesideForeignRequests(b *testing.B) {
	for _, store := range []string{"memory", "redis"} {
		for _, foreign := range []int{0, 25000} {
			b.Run(fmt.Sprintf("%s/foreign=%d", store, foreign), func(b *testing.B) {
				benchWrite(b, store == "redis", foreign)
			})
		}
	}
}

func benchWrite(b *testing.B, redis bool, foreign int) {
	const perAccount, tenants = 20, 100
	keys := map[string]string{}
	for i := range foreign/perAccount + tenants {
		keys[fmt.Sprintf("AKIDB%06d", i)] = fmt.Sprintf("%012d", 500000000000+i)
	}
	ecsSvc, _ := quota.Preset("ecs")
	sqSvc, _ := quota.Preset("servicequotas")
	cfg, err := quota.NewConfig([]*quota.Service{ecsSvc, sqSvc}, nil, keys)
	if err != nil {
		b.Fatal(err)
	}
	o := servicequotas.Options{Config: cfg}
	if redis {
		srv := redistest.Start(b)
		client := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
		b.Cleanup(func() { client.Close() })
		o.Redis = client
	}
	svc, err := servicequotas.New(o)
	if err != nil {
		b.Fatal(err)
	}
	desired := 60.0
	call := func(key, op string, in map[string]any) (string, int) {
		body, _ := json.Marshal(in)
		r := httptest.NewRequest("POST", "/", strings.NewReader(string(body)))
		r.Header.Set("X-Amz-Target", "ServiceQuotasV20190624."+op)
		r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+key+"/20261202/us-east-1/servicequotas/aws4_request, SignedHeaders=host, Signature=ab")
		r.Header.Set(awsjson.HeaderAccount, keys[key])
		w := httptest.NewRecorder()
		svc.ServeHTTP(w, r)
		var out struct{ RequestedQuota struct{ Id string } }
		_ = json.Unmarshal(w.Body.Bytes(), &out)
		return out.RequestedQuota.Id, w.Code
	}
	request := func(key string, n int) (string, int) {
		// Distinct quotas (burst and rate of several categories), so one
		// account can hold perAccount open requests.
		cats := []string{"cluster-read", "cluster-modify", "service-read", "service-modify", "task-definition-read",
			"task-definition-modify", "tag-read", "tag-modify", "setting-read", "setting-modify"}
		kind := servicequotas.Burst
		if n%2 == 1 {
			kind = servicequotas.Rate
		}
		return call(key, "RequestServiceQuotaIncrease", map[string]any{"ServiceCode": "ecs",
			"QuotaCode": servicequotas.QuotaCode("ecs", cats[(n/2)%len(cats)], kind), "DesiredValue": desired + float64(n)*1000})
	}
	for i := range foreign / perAccount {
		key := fmt.Sprintf("AKIDB%06d", tenants+i)
		for n := range perAccount {
			if _, code := request(key, n); code != 200 {
				b.Fatalf("foreign request %s %d: %d", key, n, code)
			}
		}
	}
	mux := http.NewServeMux()
	for pattern, h := range svc.AdminHandlers() {
		mux.Handle(pattern, h)
	}
	var took []time.Duration
	b.ResetTimer()
	i := 0
	for b.Loop() {
		key := fmt.Sprintf("AKIDB%06d", i%tenants)
		start := time.Now()
		id, code := request(key, 0)
		took = append(took, time.Since(start))
		if code != 200 {
			b.Fatalf("tenant request: %d", code)
		}
		b.StopTimer()
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest("POST", "/v1/admin/servicequotas/requests/"+id+"/deny", strings.NewReader(`{"reason":"bench"}`)))
		if w.Code != 200 {
			b.Fatalf("deny %s: %d %s", id, w.Code, w.Body)
		}
		b.StartTimer()
		i++
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
}
