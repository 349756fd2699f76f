package servicequotas_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/awsjson"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/limiter/limitertest"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/servicequotas"
)

// tenantKey is the one access key the tenant tests' config maps, to
// tenantAccount.
const (
	tenantKey     = "AKIDTENANT"
	tenantAccount = "111122223333"
)

// api calls a Service directly, as the gateway would after throttling.
type api struct {
	t   *testing.T
	svc *servicequotas.Service
}

// newAPI builds a Service on the config mapping tenantKey, in memory or
// (redis) on a Redis of its own.
func newAPI(t *testing.T, redis bool, p servicequotas.Policy) *api {
	t.Helper()
	ecsSvc, _ := quota.Preset("ecs")
	sqSvc, _ := quota.Preset("servicequotas")
	cfg, err := quota.NewConfig([]*quota.Service{ecsSvc, sqSvc}, nil, map[string]string{tenantKey: tenantAccount})
	if err != nil {
		t.Fatal(err)
	}
	o := servicequotas.Options{Config: cfg, Policy: p, Now: limitertest.NewClock().Now}
	if redis {
		srv := redistest.Start(t)
		client := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
		t.Cleanup(func() { client.Close() })
		o.Redis = client
	}
	svc, err := servicequotas.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return &api{t: t, svc: svc}
}

// call sends one operation signed with key (mapped keys with their
// account, as the gateway sets it) and decodes the answer into out; it
// returns the status and the AWS error code, if any.
func (a *api) call(key, op string, in any, out any) (int, string) {
	a.t.Helper()
	return a.callIn("us-east-1", key, op, in, out)
}

// callIn is call with a credential of region.
func (a *api) callIn(region, key, op string, in any, out any) (int, string) {
	a.t.Helper()
	body, _ := json.Marshal(in)
	r := httptest.NewRequest("POST", "/", strings.NewReader(string(body)))
	r.Header.Set("X-Amz-Target", "ServiceQuotasV20190624."+op)
	r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+key+"/20261202/"+region+"/servicequotas/aws4_request, SignedHeaders=host, Signature=ab")
	if key == tenantKey {
		r.Header.Set(awsjson.HeaderAccount, tenantAccount)
	}
	w := httptest.NewRecorder()
	a.svc.ServeHTTP(w, r)
	if w.Code != 200 {
		var e struct {
			Type string `json:"__type"`
		}
		json.Unmarshal(w.Body.Bytes(), &e)
		return w.Code, e.Type
	}
	if out != nil {
		if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
			a.t.Fatalf("%s: %v: %s", op, err, w.Body)
		}
	}
	return 200, ""
}

type requested struct {
	RequestedQuota struct {
		ID     string `json:"Id"`
		Status string
	}
}

// request asks for desired on ECS's cluster-read burst; it fails the test
// on anything but want ("" for success).
func (a *api) request(key string, kind servicequotas.Kind, desired float64, want string) requested {
	a.t.Helper()
	var out requested
	_, code := a.call(key, "RequestServiceQuotaIncrease", map[string]any{"ServiceCode": "ecs",
		"QuotaCode": servicequotas.QuotaCode("ecs", "cluster-read", kind), "DesiredValue": desired}, &out)
	if code != want {
		a.t.Fatalf("%s asks %v of the %s: %q, want %q", key, desired, kind, code, want)
	}
	return out
}

// admin calls an admin endpoint and decodes its JSON answer into out.
func (a *api) admin(method, path, body string, out any) int {
	a.t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	w := httptest.NewRecorder()
	mux := http.NewServeMux()
	for p, h := range a.svc.AdminHandlers() {
		mux.Handle(p, h)
	}
	mux.ServeHTTP(w, r)
	if out != nil && w.Code == 200 {
		if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
			a.t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return w.Code
}

// both runs f in memory and on Redis.
func both(t *testing.T, f func(t *testing.T, redis bool)) {
	t.Run("memory", func(t *testing.T) { f(t, false) })
	t.Run("redis", func(t *testing.T) { f(t, true) })
}

// Issue 28: 10,100 requests signed with made-up access keys, each closed
// at once (above the policy's ceiling), removed a tenant's approved
// request and its reason from the store (10,000 kept in all, oldest
// closed first, whoever's). Each account now keeps its own closed
// requests, and unmapped keys share a bounded pool.
func TestMadeUpKeysEraseNoTenantsRequest(t *testing.T) {
	both(t, func(t *testing.T, redis bool) {
		a := newAPI(t, redis, servicequotas.Policy{Rules: []servicequotas.Rule{{Service: "ecs", Burst: servicequotas.Bounds{Max: 1000}}}})
		mine := a.request(tenantKey, servicequotas.Burst, 200, "").RequestedQuota
		if mine.Status != servicequotas.StatusPending {
			t.Fatalf("tenant's request: %s", mine.Status)
		}
		const reason = "launch week, approved by ops"
		if code := a.admin("POST", "/v1/admin/servicequotas/requests/"+mine.ID+"/approve", `{"reason":"`+reason+`"}`, nil); code != 200 {
			t.Fatalf("approve: %d", code)
		}
		for i := range 10100 {
			if got := a.request(fmt.Sprintf("AKIDFAKE%05d", i), servicequotas.Burst, 5000, "").RequestedQuota.Status; got != servicequotas.StatusNotApproved {
				t.Fatalf("made-up key %d: %s", i, got)
			}
		}
		var got requested
		if status, code := a.call(tenantKey, "GetRequestedServiceQuotaChange", map[string]string{"RequestId": mine.ID}, &got); status != 200 {
			t.Fatalf("the tenant's request after the attack: %d %s", status, code)
		}
		if got.RequestedQuota.Status != servicequotas.StatusApproved {
			t.Fatalf("the tenant's request after the attack: %s", got.RequestedQuota.Status)
		}
		var page servicequotas.AdminPage
		if code := a.admin("GET", "/v1/admin/servicequotas/requests?account="+tenantAccount, "", &page); code != 200 ||
			len(page.Requests) != 1 || page.Requests[0].Reason != reason || page.Requests[0].Current != 200 {
			t.Fatalf("the tenant's history after the attack: %d %+v", code, page)
		}
		// The made-up keys' closed requests are kept up to their pool's
		// bound, the newest.
		n, token := 0, ""
		for {
			var p servicequotas.AdminPage
			if code := a.admin("GET", "/v1/admin/servicequotas/requests?status=NOT_APPROVED&limit=500&next_token="+token, "", &p); code != 200 {
				t.Fatalf("list: %d", code)
			}
			n += len(p.Requests)
			if token = p.NextToken; token == "" {
				break
			}
		}
		if n != servicequotas.MaxClosedUnmapped {
			t.Fatalf("made-up keys' closed requests kept: %d, want %d", n, servicequotas.MaxClosedUnmapped)
		}
	})
}

// Unmapped access keys share one budget of open requests: beyond
// MaxOpenUnmapped in all, the next one, from any made-up key, is
// QuotaExceededException at once, while the tenant's mapped key is not
// counted; a request decided frees its place.
func TestUnmappedKeysShareABoundedBudget(t *testing.T) {
	both(t, func(t *testing.T, redis bool) {
		a := newAPI(t, redis, servicequotas.Policy{})
		var first string
		for i := range servicequotas.MaxOpenUnmapped {
			r := a.request(fmt.Sprintf("AKIDFAKE%05d", i), servicequotas.Burst, 100, "")
			if i == 0 {
				first = r.RequestedQuota.ID
			}
		}
		a.request("AKIDFAKEMORE", servicequotas.Burst, 100, "QuotaExceededException")
		a.request("AKIDFAKE00001", servicequotas.Rate, 100, "QuotaExceededException")
		a.request(tenantKey, servicequotas.Burst, 100, "")
		if code := a.admin("POST", "/v1/admin/servicequotas/requests/"+first+"/deny", `{"reason":"no"}`, nil); code != 200 {
			t.Fatalf("deny: %d", code)
		}
		a.request("AKIDFAKEMORE", servicequotas.Burst, 100, "")
		a.request("AKIDFAKEONEMORE", servicequotas.Burst, 100, "QuotaExceededException")
	})
}

// Approved values of unmapped keys are bounded too: an automatic approval
// that would hold one more than MaxAppliedUnmapped is refused.
func TestUnmappedKeysHoldBoundedValues(t *testing.T) {
	both(t, func(t *testing.T, redis bool) {
		a := newAPI(t, redis, servicequotas.Policy{Rules: []servicequotas.Rule{{AutoApproveFactor: 2}}})
		for i := range servicequotas.MaxAppliedUnmapped {
			if s := a.request(fmt.Sprintf("AKIDFAKE%05d", i), servicequotas.Burst, 60, "").RequestedQuota.Status; s != servicequotas.StatusApproved {
				t.Fatalf("request %d: %s", i, s)
			}
		}
		a.request("AKIDFAKEMORE", servicequotas.Burst, 60, "QuotaExceededException")
		// A key already holding a value may raise it; the tenant is not counted.
		a.request("AKIDFAKE00000", servicequotas.Burst, 70, "")
		a.request(tenantKey, servicequotas.Burst, 60, "")
	})
}

// redisCalls is how many commands Redis has run, scripts' own included,
// by command.
func redisCalls(t *testing.T, rdb *goredis.Client) map[string]int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		var x int
		fmt.Sscan(n, &x)
		out[name] = x
	}
	return out
}

// Issue 28: on Redis the whole state was one JSON value, read, decoded,
// re-encoded and written under WATCH on every write, so a write cost as
// much as every tenant's requests. A tenant's request and its approval
// now run the same Redis commands with 3,000 other requests stored as
// with none, and no string or hash in Redis grows with them.
func TestRedisWriteCostIsTheTenantsOwn(t *testing.T) {
	srv := redistest.Start(t)
	rdb := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	ecsSvc, _ := quota.Preset("ecs")
	sqSvc, _ := quota.Preset("servicequotas")
	cfg, err := quota.NewConfig([]*quota.Service{ecsSvc, sqSvc}, nil, map[string]string{tenantKey: tenantAccount, "AKIDOTHER": "444455556666"})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := servicequotas.New(servicequotas.Options{Config: cfg, Redis: rdb, Now: limitertest.NewClock().Now,
		Policy: servicequotas.Policy{Rules: []servicequotas.Rule{{Service: "ecs", Burst: servicequotas.Bounds{Max: 1000}}}}})
	if err != nil {
		t.Fatal(err)
	}
	a := &api{t: t, svc: svc}
	// cost runs the tenant's request and its approval and counts the
	// commands Redis ran for them.
	cost := func(desired float64) map[string]int {
		before := redisCalls(t, rdb)
		id := a.request(tenantKey, servicequotas.Burst, desired, "").RequestedQuota.ID
		a.admin("POST", "/v1/admin/servicequotas/requests/"+id+"/approve", `{"reason":"ok"}`, nil)
		after := redisCalls(t, rdb)
		for k, v := range before {
			after[k] -= v
		}
		after["info"], after["hello"] = 0, 0 // redisCalls' own, and a new pooled connection's handshake
		for k, v := range after {
			if v == 0 {
				delete(after, k)
			}
		}
		return after
	}
	// Another tenant's first request and approval load the scripts and
	// look for a legacy document to migrate, which only the first does.
	id := a.request("AKIDOTHER", servicequotas.Rate, 100, "").RequestedQuota.ID
	a.admin("POST", "/v1/admin/servicequotas/requests/"+id+"/approve", `{"reason":"ok"}`, nil)
	alone := cost(100)
	for i := range 3000 {
		key := fmt.Sprintf("AKIDFAKE%05d", i)
		if i%2 == 0 {
			key = "AKIDOTHER"
		}
		a.request(key, servicequotas.Burst, float64(5000+i), "")
	}
	crowded := cost(200)
	if fmt.Sprint(alone) != fmt.Sprint(crowded) {
		t.Fatalf("the tenant's write ran %v alone and %v beside 3,000 other requests", alone, crowded)
	}
	t.Logf("a request and its approval: %v", alone)
	keys, err := rdb.Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	// No value is written whole on a write: the sorted sets (indexes) grow
	// with the requests kept, but are changed in place, member by member.
	for _, k := range keys {
		typ := rdb.Type(context.Background(), k).Val()
		if n, err := rdb.MemoryUsage(context.Background(), k).Result(); err == nil && typ != "zset" && n > 16<<10 {
			t.Errorf("%s %s holds %d bytes", typ, k, n)
		}
	}
}

// The admin listing is paged and filtered on the server: a bounded
// default page, next_token through every request once, newest first,
// and filters by account and by one or more statuses.
func TestAdminListPages(t *testing.T) {
	both(t, func(t *testing.T, redis bool) {
		a := newAPI(t, redis, servicequotas.Policy{Rules: []servicequotas.Rule{{Service: "ecs", Burst: servicequotas.Bounds{Max: 1000}}}})
		var made []string // oldest first
		for i := range 230 {
			desired := 5000.0 // NOT_APPROVED
			if i%10 == 0 {
				desired = 100 // PENDING
			}
			made = append(made, a.request(fmt.Sprintf("AKIDPAGE%03d", i%40), servicequotas.Burst, desired+float64(i), map[bool]string{true: "", false: "ResourceAlreadyExistsException"}[desired > 1000 || i < 40]).RequestedQuota.ID)
		}
		var seen []string
		token, pages := "", 0
		for {
			var p servicequotas.AdminPage
			if code := a.admin("GET", "/v1/admin/servicequotas/requests?next_token="+token, "", &p); code != 200 {
				t.Fatalf("page %d: %d", pages, code)
			}
			pages++
			if len(p.Requests) > servicequotas.DefaultAdminPage {
				t.Fatalf("page of %d", len(p.Requests))
			}
			for _, r := range p.Requests {
				seen = append(seen, r.ID)
			}
			if token = p.NextToken; token == "" {
				break
			}
		}
		var want []string
		for i := len(made) - 1; i >= 0; i-- {
			if made[i] != "" {
				want = append(want, made[i])
			}
		}
		if pages != 3 || strings.Join(seen, ",") != strings.Join(want, ",") {
			t.Fatalf("%d pages, %d requests listed of %d", pages, len(seen), len(want))
		}
		var p servicequotas.AdminPage
		if a.admin("GET", "/v1/admin/servicequotas/requests?account=AKIDPAGE001&limit=2", "", &p); len(p.Requests) != 2 || p.NextToken == "" ||
			p.Requests[0].Account != "AKIDPAGE001" || p.Requests[0].ID != made[201] || p.Requests[1].ID != made[161] {
			t.Fatalf("by account: %+v", p)
		}
		p = servicequotas.AdminPage{}
		if a.admin("GET", "/v1/admin/servicequotas/requests?status=PENDING", "", &p); len(p.Requests) != 4 || p.NextToken != "" {
			t.Fatalf("pending: %d %q", len(p.Requests), p.NextToken)
		}
		p = servicequotas.AdminPage{}
		if a.admin("GET", "/v1/admin/servicequotas/requests?status=PENDING,NOT_APPROVED&limit=500", "", &p); len(p.Requests) != len(want) {
			t.Fatalf("pending and not approved: %d", len(p.Requests))
		}
		for _, q := range []string{"limit=0", "limit=501", "limit=x", "next_token=abc", "status=NOPE", "status=PENDING,", "account=" + strings.Repeat("a", 300)} {
			if code := a.admin("GET", "/v1/admin/servicequotas/requests?"+q, "", nil); code != 400 {
				t.Errorf("?%s: %d, want 400", q, code)
			}
		}
	})
}

// Issue 28: a rule's auto_approve_up_to of 80 for cluster-read (burst 50,
// 20/s) approved the rate up to 80/s too, 4× its default, and a max of
// 1,000 allowed 1,000/s. The burst and the rate now have values of their
// own, and a factor applies to each one's default.
func TestApprovalRulesSplitBurstAndRate(t *testing.T) {
	a := newAPI(t, false, servicequotas.Policy{Rules: []servicequotas.Rule{
		{Service: "ecs", Category: "cluster-read", Burst: servicequotas.Bounds{AutoApproveUpTo: 80, Max: 1000}},
		{Service: "ecs", AutoApproveFactor: 2, MaxFactor: 10},
	}})
	for _, tc := range []struct {
		key     string
		kind    servicequotas.Kind
		desired float64
		want    string
	}{
		{"AKID1", servicequotas.Burst, 80, servicequotas.StatusApproved},
		{"AKID1", servicequotas.Rate, 80, servicequotas.StatusPending}, // was APPROVED
		{"AKID2", servicequotas.Burst, 1001, servicequotas.StatusNotApproved},
		{"AKID2", servicequotas.Rate, 1000, servicequotas.StatusPending}, // the rate has no ceiling in this rule
	} {
		if got := a.request(tc.key, tc.kind, tc.desired, "").RequestedQuota.Status; got != tc.want {
			t.Errorf("cluster-read %s %v: %s, want %s", tc.kind, tc.desired, got, tc.want)
		}
	}
	// The service's rule: a factor of each quota's own default, for
	// another category's burst and rate.
	c := a.svc.Catalog()
	qs, _ := c.Quotas("ecs")
	other := qs[0].Category
	if other == "cluster-read" {
		other = qs[2].Category
	}
	for _, q := range qs {
		if q.Category != other {
			continue
		}
		for _, tc := range []struct {
			desired float64
			want    string
		}{{2 * q.Default, servicequotas.StatusApproved}, {2*q.Default + 1, servicequotas.StatusPending}, {10*q.Default + 1, servicequotas.StatusNotApproved}} {
			var out requested
			a.call("AKIDX"+q.Code[2:], "RequestServiceQuotaIncrease", map[string]any{"ServiceCode": "ecs", "QuotaCode": q.Code, "DesiredValue": tc.desired}, &out)
			if out.RequestedQuota.Status != tc.want {
				t.Errorf("%s %v: %q, want %s", q.Name, tc.desired, out.RequestedQuota.Status, tc.want)
			}
			if out.RequestedQuota.Status == servicequotas.StatusPending {
				a.admin("POST", "/v1/admin/servicequotas/requests/"+out.RequestedQuota.ID+"/deny", `{}`, nil)
			}
		}
	}
	var b strings.Builder
	if err := servicequotas.WriteTable(&b, c.Config(), servicequotas.Policy{Rules: []servicequotas.Rule{
		{Service: "ecs", Category: "cluster-read", Burst: servicequotas.Bounds{AutoApproveUpTo: 80, Max: 1000}}}}); err != nil {
		t.Fatal(err)
	}
	// Columns aligned by tabwriter: compared with runs of spaces as one.
	table := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{"cluster-read burst 50 requests approve up to 80, refuse above 1000",
		"cluster-read rate 20 requests per second operator decides"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

// An account past its own bound of closed requests forgets its own
// oldest, never another account's, mapped or not.
func TestAccountsForgetOnlyTheirOwnClosedRequests(t *testing.T) {
	both(t, func(t *testing.T, redis bool) {
		a := newAPI(t, redis, servicequotas.Policy{Rules: []servicequotas.Rule{{Service: "ecs", Burst: servicequotas.Bounds{Max: 1000}}}})
		other := a.request("AKIDOTHER", servicequotas.Burst, 5000, "").RequestedQuota.ID
		var mine []string
		for i := range servicequotas.MaxClosedPerAccount + 10 {
			mine = append(mine, a.request(tenantKey, servicequotas.Burst, float64(5000+i), "").RequestedQuota.ID)
		}
		var page servicequotas.AdminPage
		a.admin("GET", "/v1/admin/servicequotas/requests?limit=500&account="+tenantAccount, "", &page)
		if len(page.Requests) != servicequotas.MaxClosedPerAccount || page.NextToken != "" || page.Requests[0].ID != mine[len(mine)-1] ||
			page.Requests[len(page.Requests)-1].ID != mine[10] {
			t.Fatalf("the tenant keeps %d requests (next %q), want its newest %d", len(page.Requests), page.NextToken, servicequotas.MaxClosedPerAccount)
		}
		for id, want := range map[string]int{mine[9]: 400, other: 200} {
			if status, _ := a.call(map[bool]string{true: "AKIDOTHER", false: tenantKey}[id == other], "GetRequestedServiceQuotaChange", map[string]string{"RequestId": id}, nil); status != want {
				t.Errorf("request %s: %d, want %d", id, status, want)
			}
		}
	})
}

// TestAdminListSaysWhenTheAPIIsOff: the listing says whether the config
// serves the API, so the live view can say it is off rather than "no
// request is waiting"; a reload that drops the preset turns it off.
func TestAdminListSaysWhenTheAPIIsOff(t *testing.T) {
	a := newAPI(t, false, servicequotas.Policy{})
	var p servicequotas.AdminPage
	if code := a.admin("GET", "/v1/admin/servicequotas/requests", "", &p); code != 200 || !p.APIServed {
		t.Fatalf("with the preset: %d %+v, want api_served", code, p)
	}
	ecsSvc, _ := quota.Preset("ecs")
	cfg, err := quota.NewConfig([]*quota.Service{ecsSvc}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.svc.SetConfig(cfg, servicequotas.Policy{}); err != nil {
		t.Fatal(err)
	}
	if code := a.admin("GET", "/v1/admin/servicequotas/requests", "", &p); code != 200 || p.APIServed {
		t.Fatalf("without the preset: %d %+v, want api_served false", code, p)
	}
}
