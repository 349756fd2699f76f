package cloudmap_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/cloudmap"
	"github.com/tollgate/tollgate/gateway"
	"github.com/tollgate/tollgate/internal/redistest"
)

// answer is one Cloud Map answer: its status, error code and message, and
// the document.
type answer struct {
	status        int
	code, message string
	doc           map[string]any
}

// send sends one Cloud Map request to url as access key key, with the
// account the gateway mapped it to (none when account is "").
func send(t *testing.T, url, key, account, op, body string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Amz-Target", cloudmap.TargetPrefix+"."+op)
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+key+"/20260101/us-east-1/servicediscovery/aws4_request, SignedHeaders=host, Signature=00")
	if account != "" {
		req.Header.Set(gateway.HeaderAccount, account)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode}
	if err := json.NewDecoder(resp.Body).Decode(&a.doc); err != nil {
		t.Fatalf("%s: %d, undecodable answer: %v", op, resp.StatusCode, err)
	}
	a.code, _ = a.doc["__type"].(string)
	a.message, _ = a.doc["message"].(string)
	return a
}

// squat has key (account, when named) create namespace "squat" with
// service "web" and register up to n instances of about 600 estimated
// bytes each. It returns how many registrations were accepted and the
// first refusal (status 0 when there was none).
func squat(t *testing.T, url, key, account string, n int) (int, answer) {
	t.Helper()
	a := send(t, url, key, account, "CreateHttpNamespace", `{"Name":"squat"}`)
	if a.status != 200 {
		return 0, a
	}
	a = send(t, url, key, account, "GetOperation", fmt.Sprintf(`{"OperationId":%q}`, a.doc["OperationId"]))
	nsID := a.doc["Operation"].(map[string]any)["Targets"].(map[string]any)["NAMESPACE"].(string)
	a = send(t, url, key, account, "CreateService", fmt.Sprintf(`{"Name":"web","NamespaceId":%q}`, nsID))
	if a.status != 200 {
		return 0, a
	}
	svcID := a.doc["Service"].(map[string]any)["Id"].(string)
	pad := strings.Repeat("p", 200)
	for i := range n {
		a = send(t, url, key, account, "RegisterInstance", fmt.Sprintf(`{"ServiceId":%q,"InstanceId":"i-%d","Attributes":{"AWS_INSTANCE_IPV4":"10.0.0.1","pad":%q}}`, svcID, i, pad))
		if a.status != 200 {
			return i, a
		}
	}
	return n, answer{}
}

// squatAll has 400 made-up keys, taking turns on urls, each squat with 10
// instances; it returns how many registrations were accepted in all and
// the refusals.
func squatAll(t *testing.T, urls []string) (int, []answer) {
	t.Helper()
	total := 0
	var refused []answer
	for i := range 400 {
		n, a := squat(t, urls[i%len(urls)], fmt.Sprintf("AKIDMADEUP%04d", i), "", 10)
		total += n
		if a.status != 0 {
			refused = append(refused, a)
		}
	}
	return total, refused
}

// On Redis, the accounts of made-up keys share the same bounded budget as
// in memory, across nodes: 400 made-up keys registering instances through
// two nodes on one Redis are refused beyond it with the memory store's
// error, after as many registrations as the memory store accepts, while a
// named account still registers on either node. (Before, Redis took every
// registration: 400 keys registered 38,400 instances, 392 MB in Redis.)
func TestRedisMadeUpKeysShareTheBudget(t *testing.T) {
	lim := cloudmap.Limits{UnknownBytes: 1 << 20, UnknownAccountBytes: 16 << 10}
	mem, err := cloudmap.New(cloudmap.Options{Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	memSrv := httptest.NewServer(mem)
	t.Cleanup(memSrv.Close)
	memTotal, memRefused := squatAll(t, []string{memSrv.URL})
	if len(memRefused) == 0 || memTotal >= 4000 {
		t.Fatalf("memory: %d registrations, %d refusals: the scenario does not fill the budget", memTotal, len(memRefused))
	}

	srv := redistest.Start(t)
	var urls []string
	for range 2 {
		client := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
		t.Cleanup(func() { client.Close() })
		reg, err := cloudmap.New(cloudmap.Options{Redis: client, Limits: lim})
		if err != nil {
			t.Fatal(err)
		}
		s := httptest.NewServer(reg)
		t.Cleanup(s.Close)
		urls = append(urls, s.URL)
	}
	total, refused := squatAll(t, urls)
	t.Logf("memory: %d registrations, %d refusals (%q); Redis: %d, %d", memTotal, len(memRefused), memRefused[0].message, total, len(refused))
	if total != memTotal || len(refused) != len(memRefused) {
		t.Errorf("Redis: %d registrations and %d refusals, memory: %d and %d", total, len(refused), memTotal, len(memRefused))
	}
	for i, a := range refused {
		if a.status != 400 || a.code != "ResourceLimitExceeded" || a.message != memRefused[len(memRefused)-1].message {
			t.Fatalf("Redis refusal %d: %d %s %q, want the memory store's 400 ResourceLimitExceeded %q", i, a.status, a.code, a.message, memRefused[len(memRefused)-1].message)
		}
	}
	for i, url := range urls {
		if n, a := squat(t, url, fmt.Sprint("AKIDNAMED", i), fmt.Sprint("12345678901", i), 10); n != 10 {
			t.Errorf("a named account on node %d, with the budget full: %d registrations, then %d %s %s", i, n, a.status, a.code, a.message)
		}
	}
}

// One made-up key's account holds at most UnknownAccountBytes on Redis as in
// memory, also when its registrations take turns on two nodes, each of
// which brings its copy up to date from the other's changes: the same
// registrations are accepted as in memory, then refused with its error.
func TestRedisOneAccountsShareAcrossNodes(t *testing.T) {
	lim := cloudmap.Limits{UnknownAccountBytes: 16 << 10}
	mem, err := cloudmap.New(cloudmap.Options{Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	memSrv := httptest.NewServer(mem)
	t.Cleanup(memSrv.Close)
	want, wantRefusal := squat(t, memSrv.URL, "AKIDONE", "", 100)
	if wantRefusal.status != 400 {
		t.Fatalf("memory: %d registrations and no refusal", want)
	}

	srv := redistest.Start(t)
	var urls []string
	for range 2 {
		client := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
		t.Cleanup(func() { client.Close() })
		reg, err := cloudmap.New(cloudmap.Options{Redis: client, Limits: lim})
		if err != nil {
			t.Fatal(err)
		}
		s := httptest.NewServer(reg)
		t.Cleanup(s.Close)
		urls = append(urls, s.URL)
	}
	if n, a := squat(t, urls[0], "AKIDONE", "", 0); a.status != 0 || n != 0 {
		t.Fatalf("creating the namespace and service: %d %s", a.status, a.message)
	}
	svcs := send(t, urls[1], "AKIDONE", "", "ListServices", `{}`).doc["Services"].([]any)
	svcID := svcs[0].(map[string]any)["Id"].(string)
	pad := strings.Repeat("p", 200)
	got := 0
	var refusal answer
	for i := range 100 {
		a := send(t, urls[i%2], "AKIDONE", "", "RegisterInstance", fmt.Sprintf(`{"ServiceId":%q,"InstanceId":"i-%d","Attributes":{"AWS_INSTANCE_IPV4":"10.0.0.1","pad":%q}}`, svcID, i, pad))
		if a.status != 200 {
			refusal = a
			break
		}
		got++
	}
	if got != want || refusal.code != wantRefusal.code || refusal.message != wantRefusal.message {
		t.Fatalf("Redis, two nodes: %d registrations, then %d %s %q; memory: %d, then %s %q", got, refusal.status, refusal.code, refusal.message,
			want, wantRefusal.code, wantRefusal.message)
	}
}

// updates has key update namespace "squat" up to n times through urls in
// turn, and returns how many were accepted and the first refusal.
func updates(t *testing.T, urls []string, key string, n int) (int, answer) {
	t.Helper()
	a := send(t, urls[0], key, "", "CreateHttpNamespace", `{"Name":"squat"}`)
	if a.status != 200 {
		t.Fatalf("CreateHttpNamespace: %d %s %s", a.status, a.code, a.message)
	}
	a = send(t, urls[0], key, "", "GetOperation", fmt.Sprintf(`{"OperationId":%q}`, a.doc["OperationId"]))
	nsID := a.doc["Operation"].(map[string]any)["Targets"].(map[string]any)["NAMESPACE"].(string)
	for i := range n {
		a = send(t, urls[i%len(urls)], key, "", "UpdateHttpNamespace", fmt.Sprintf(`{"Id":%q,"Namespace":{"Description":"update %d"}}`, nsID, i))
		if a.status != 200 {
			return i, a
		}
	}
	return n, answer{}
}

// The operations an account's changes leave (up to Limits.Operations of
// them, for GetOperation and ListOperations) count in its share, in
// memory and on Redis alike: an unknown account updating its namespace
// over and over is refused once its share is full. (Before, operations
// took no room, so each made-up key could hold 1,000 of them beyond its
// share.)
func TestOperationsCountInTheBudget(t *testing.T) {
	lim := cloudmap.Limits{UnknownAccountBytes: 16 << 10}
	mem, err := cloudmap.New(cloudmap.Options{Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	memSrv := httptest.NewServer(mem)
	t.Cleanup(memSrv.Close)
	want, wantRefusal := updates(t, []string{memSrv.URL}, "AKIDUPDATES", 200)
	if wantRefusal.status != 400 || wantRefusal.code != "InvalidInput" || want >= 200 {
		t.Fatalf("memory: %d updates, then %d %s %q; want a refusal (InvalidInput, the code UpdateHttpNamespace has for it)", want, wantRefusal.status, wantRefusal.code, wantRefusal.message)
	}

	srv := redistest.Start(t)
	var urls []string
	for range 2 {
		client := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
		t.Cleanup(func() { client.Close() })
		reg, err := cloudmap.New(cloudmap.Options{Redis: client, Limits: lim})
		if err != nil {
			t.Fatal(err)
		}
		s := httptest.NewServer(reg)
		t.Cleanup(s.Close)
		urls = append(urls, s.URL)
	}
	got, refusal := updates(t, urls, "AKIDUPDATES", 200)
	if got != want || refusal.code != wantRefusal.code || refusal.message != wantRefusal.message {
		t.Fatalf("Redis, two nodes: %d updates, then %d %s %q; memory: %d, then %s %q", got, refusal.status, refusal.code, refusal.message,
			want, wantRefusal.code, wantRefusal.message)
	}
}
