package cloudmap

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/awsjson"
)

// sendIn sends one operation to r in region, signed with access key key
// (mapped to account unless it is ""), and returns the status and body.
func sendIn(r *Registry, key, account, region, op, body string) (int, string) {
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewBufferString(body))
	req.Header.Set("X-Amz-Target", TargetPrefix+"."+op)
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+key+"/20260101/"+region+"/servicediscovery/aws4_request, SignedHeaders=host, Signature=0")
	if account != "" {
		req.Header.Set(awsjson.HeaderAccount, account)
	}
	w := httptest.NewRecorder()
	r.ServeHTTP(w, req)
	return w.Code, w.Body.String()
}

// A registry that keeps almost nothing in memory answers every call as a
// memory registry given the same calls does: scopes dropped and read
// again hold what was written, and the unknown accounts' budget, shared
// and per account across regions, refuses the same creations. A start
// from the file counts the same budget, and reads the same scopes.
func TestBoltStoreDropsAndRereadsScopes(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	lim := Limits{UnknownAccountBytes: 12 << 10, UnknownBytes: 40 << 10}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	opts := func() Options {
		return Options{Now: func() time.Time { return at }, Rand: rand.NewChaCha8([32]byte{7}), Limits: lim}
	}
	o := opts()
	o.Durable, o.CacheBytes = db, 1 // every scope without a write in flight is dropped
	cached, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := New(opts())
	if err != nil {
		t.Fatal(err)
	}
	type who struct{ key, account string }
	callers := []who{{"AKIDMAPPED1", "111111111111"}, {"AKIDMAPPED2", "222222222222"}, {"AKIDMADEUP1", ""}, {"AKIDMADEUP2", ""}, {"AKIDMADEUP3", ""}}
	regions := []string{"us-east-1", "eu-west-1"}
	refused := 0
	both := func(c who, region, op, body string) string {
		t.Helper()
		wantCode, want := sendIn(mem, c.key, c.account, region, op, body)
		code, got := sendIn(cached, c.key, c.account, region, op, body)
		if code != wantCode || got != want {
			t.Fatalf("%s %s in %s: answered %d %s, memory %d %s", c.key, op, region, code, got, wantCode, want)
		}
		if bytes.Contains([]byte(got), []byte(codeResourceLimitExceeded)) {
			refused++
		}
		return got
	}
	// Each caller in each region: namespaces, services, instances until
	// the unknown accounts' shares and the shared room are taken, and
	// deregistrations between.
	for _, c := range callers {
		for _, region := range regions {
			for i := range 3 {
				both(c, region, "CreateHttpNamespace", fmt.Sprintf(`{"Name":"ns-%d","CreatorRequestId":"c-%d"}`, i, i))
			}
			var list struct{ Namespaces []struct{ Id string } }
			_ = json.Unmarshal([]byte(both(c, region, "ListNamespaces", `{}`)), &list)
			for i, ns := range list.Namespaces {
				var sv struct{ Service struct{ Id string } }
				if json.Unmarshal([]byte(both(c, region, "CreateService", fmt.Sprintf(`{"Name":"svc-%d","NamespaceId":%q}`, i, ns.Id))), &sv) != nil || sv.Service.Id == "" {
					continue
				}
				for j := range 8 {
					both(c, region, "RegisterInstance", fmt.Sprintf(`{"ServiceId":%q,"InstanceId":"i-%d","Attributes":{"AWS_INSTANCE_IPV4":"10.0.0.%d","pad":"%0200d"}}`, sv.Service.Id, j, j, j))
				}
				both(c, region, "DeregisterInstance", fmt.Sprintf(`{"ServiceId":%q,"InstanceId":"i-0"}`, sv.Service.Id))
				both(c, region, "ListInstances", fmt.Sprintf(`{"ServiceId":%q}`, sv.Service.Id))
			}
		}
	}
	if refused == 0 {
		t.Fatal("no creation was refused: the budget was never reached")
	}
	b := cached.store.(*boltStore)
	m := mem.store.(*memStore)
	b.mem.mu.Lock()
	held := len(b.mem.scopes)
	if b.mem.budget.used != m.budget.used || !reflect.DeepEqual(b.mem.accounts, m.accounts) {
		t.Fatalf("budget used %d by %v, memory %d by %v", b.mem.budget.used, b.mem.accounts, m.budget.used, m.accounts)
	}
	b.mem.mu.Unlock()
	if held > 1 || len(m.scopes) < 5 {
		t.Fatalf("%d scopes held of %d", held, len(m.scopes))
	}
	if u, all := cached.CacheUse(), mem.CacheUse(); u.Scopes != held || all.Scopes != len(m.scopes) || all.Bytes <= u.Bytes {
		t.Fatalf("CacheUse %+v over the file, %+v in memory; %d scopes held of %d", u, all, held, len(m.scopes))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDB(t, dir)
	defer db.Close()
	again, err := newBoltStore(lim.withDefaults(), db, 0)
	if err != nil {
		t.Fatal(err)
	}
	if again.mem.budget.used != m.budget.used || !reflect.DeepEqual(again.mem.accounts, m.accounts) {
		t.Fatalf("started with budget used %d by %v, memory %d by %v", again.mem.budget.used, again.mem.accounts, m.budget.used, m.accounts)
	}
	if len(again.mem.scopes) != 0 {
		t.Fatalf("a start read %d scopes", len(again.mem.scopes))
	}
	sameStates(t, m, readAll(t, again, m))
}

// Writers and readers of many scopes at once, with room for none of
// them: every write answered is on disk and in the scope when read
// again, while scopes are dropped and read back between the calls.
func TestBoltStoreConcurrentScopesWithoutRoom(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	r, err := New(Options{Durable: db, CacheBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	errs := make(chan error, 64)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			sc := Scope{Account: fmt.Sprintf("%012d", w%4), Region: regionsOf(w)}
			for i := range 10 {
				id := fmt.Sprintf("i-%d-%d", w, i)
				if err := r.RegisterInstance(ctx, sc, "local", "web", id, map[string]string{"AWS_INSTANCE_PORT": "80"}); err != nil {
					errs <- err
					return
				}
				found := false
				if err := r.store.view(ctx, sc.key(), false, func(s *state) error {
					for _, sv := range s.Services {
						found = found || sv.Instances[id] != nil
					}
					return nil
				}); err != nil || !found {
					errs <- fmt.Errorf("%s in %s: not found after its registration (%v)", id, sc.key(), err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	again, err := newBoltStore(r.lim, db, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for w := range 8 {
		sc := Scope{Account: fmt.Sprintf("%012d", w%4), Region: regionsOf(w)}
		_ = again.view(ctx, sc.key(), false, func(s *state) error {
			for _, sv := range s.Services {
				for id := range sv.Instances {
					if strings.HasPrefix(id, fmt.Sprintf("i-%d-", w)) {
						n++
					}
				}
			}
			return nil
		})
	}
	if n != 80 {
		t.Fatalf("%d instances read back from the file, want 80", n)
	}
}

// regionsOf spreads writers over two regions.
func regionsOf(w int) string { return []string{"us-east-1", "eu-west-1"}[w/4] }
