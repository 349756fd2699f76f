package cloudmap

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/awsjson"
	"github.com/tollgate/tollgate/state/bolt"
)

// send sends one operation to r, signed with access key key (mapped to
// account unless it is ""), and fails the test unless it answers 200; it
// returns the answer's JSON.
func send(t *testing.T, r *Registry, key, account, op, body string) string {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewBufferString(body))
	req.Header.Set("X-Amz-Target", TargetPrefix+"."+op)
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+key+"/20260101/us-east-1/servicediscovery/aws4_request, SignedHeaders=host, Signature=0")
	if account != "" {
		req.Header.Set(awsjson.HeaderAccount, account)
	}
	w := httptest.NewRecorder()
	r.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		t.Fatalf("%s %s: %d %s", op, body, w.Code, w.Body)
	}
	return w.Body.String()
}

func openDB(t *testing.T, dir string) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(dir, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// readAll reads into b every scope want holds, and returns b's memory
// store.
func readAll(t *testing.T, b *boltStore, want *memStore) *memStore {
	t.Helper()
	b.mem.mu.Lock()
	defer b.mem.mu.Unlock()
	for scope := range want.scopes {
		if err := b.scope(scope); err != nil {
			t.Fatal(err)
		}
	}
	return b.mem
}

// sameStates fails unless the two stores hold the same scopes, each with
// the same records, derived indexes, size and budget.
func sameStates(t *testing.T, want, got *memStore) {
	t.Helper()
	if !reflect.DeepEqual(want.accounts, got.accounts) {
		t.Fatalf("unknown accounts hold %v, reloaded %v", want.accounts, got.accounts)
	}
	if len(want.scopes) != len(got.scopes) || want.budget.used != got.budget.used {
		t.Fatalf("%d scopes using %d budget bytes, reloaded as %d using %d", len(want.scopes), want.budget.used, len(got.scopes), got.budget.used)
	}
	for key, w := range want.scopes {
		g := got.scopes[key]
		if g == nil {
			t.Fatalf("scope %s is not reloaded", key)
		}
		for _, f := range []struct {
			name      string
			want, got any
		}{
			{"Seq", w.Seq, g.Seq}, {"Namespaces", w.Namespaces, g.Namespaces}, {"Services", w.Services, g.Services},
			{"Ops", w.Ops, g.Ops}, {"OpOrder", w.OpOrder, g.OpOrder}, {"Tags", w.Tags, g.Tags},
			{"reqs", w.reqs, g.reqs}, {"size", w.size, g.size}, {"known", want.known[key], got.known[key]},
		} {
			if !reflect.DeepEqual(f.want, f.got) {
				t.Fatalf("scope %s: %s is %#v, reloaded %#v", key, f.name, f.want, f.got)
			}
		}
		for id, sv := range w.Services {
			if !reflect.DeepEqual(sv.Instances, g.Services[id].Instances) || sv.Revision != g.Services[id].Revision {
				t.Fatalf("scope %s service %s: instances %v rev %d, reloaded %v rev %d", key, id, sv.Instances, sv.Revision, g.Services[id].Instances, g.Services[id].Revision)
			}
		}
	}
}

// Every kind of change reaches the file: a registry reloaded from it
// holds exactly the state the first one held, for a known account and an
// unknown one, after creations, updates, tags, deregistrations and
// deletions.
func TestBoltStoreReloadsEveryChange(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	r, err := New(Options{Durable: db})
	if err != nil {
		t.Fatal(err)
	}
	// A mapped account (known) and a key nobody mapped (unknown).
	for _, who := range [][2]string{{"AKIDMAPPED", "111111111111"}, {"AKIDMADEUP", ""}} {
		key, account := who[0], who[1]
		call := func(t *testing.T, r *Registry, _, op, body string) string {
			t.Helper()
			return send(t, r, key, account, op, body)
		}
		if account == "" {
			account = awsjson.AccountID(key)
		}
		op := call(t, r, account, "CreateHttpNamespace", `{"Name":"local","CreatorRequestId":"c1","Tags":[{"Key":"team","Value":"a"}]}`)
		var ns string
		_ = r.store.view(t.Context(), account+"/us-east-1", false, func(s *state) error {
			for id := range s.Namespaces {
				ns = id
			}
			return nil
		})
		if ns == "" {
			t.Fatalf("no namespace after %s", op)
		}
		web := svcID(t, call(t, r, account, "CreateService", `{"Name":"web","NamespaceId":"`+ns+`","HealthCheckCustomConfig":{}}`))
		old := svcID(t, call(t, r, account, "CreateService", `{"Name":"old","NamespaceId":"`+ns+`"}`))
		for i := range 4 {
			call(t, r, account, "RegisterInstance", fmt.Sprintf(`{"ServiceId":%q,"InstanceId":"i-%d","CreatorRequestId":"req-%d","Attributes":{"AWS_INSTANCE_IPV4":"10.0.0.%d"}}`, web, i, i, i))
		}
		call(t, r, account, "RegisterInstance", `{"ServiceId":"`+old+`","InstanceId":"gone","Attributes":{"k":"v"}}`)
		call(t, r, account, "DeregisterInstance", `{"ServiceId":"`+old+`","InstanceId":"gone"}`)
		call(t, r, account, "DeleteService", `{"Id":"`+old+`"}`)
		call(t, r, account, "DeregisterInstance", `{"ServiceId":"`+web+`","InstanceId":"i-1"}`)
		call(t, r, account, "UpdateInstanceCustomHealthStatus", `{"ServiceId":"`+web+`","InstanceId":"i-2","Status":"UNHEALTHY"}`)
		call(t, r, account, "TagResource", `{"ResourceARN":"arn:aws:servicediscovery:us-east-1:`+account+`:service/`+web+`","Tags":[{"Key":"k","Value":"v"}]}`)
		call(t, r, account, "UpdateService", `{"Id":"`+web+`","Service":{"Description":"d"}}`)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDB(t, dir)
	defer db.Close()
	again, err := newBoltStore(r.lim, db, 0)
	if err != nil {
		t.Fatal(err)
	}
	sameStates(t, r.store.(*boltStore).mem, readAll(t, again, r.store.(*boltStore).mem))
}

func svcID(t *testing.T, answer string) string {
	t.Helper()
	var out struct{ Service struct{ Id string } }
	if err := json.Unmarshal([]byte(answer), &out); err != nil || out.Service.Id == "" {
		t.Fatalf("CreateService answered %s", answer)
	}
	return out.Service.Id
}

// Concurrent registrations share commits and none is lost: after they
// all answered, a reload from the file holds every one.
func TestBoltStoreConcurrentRegistrations(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	r, err := New(Options{Durable: db})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	sc := Scope{Account: "333333333333", Region: "us-east-1"}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 8 {
		wg.Go(func() {
			for i := range 8 {
				if err := r.RegisterInstance(ctx, sc, "local", "web", fmt.Sprintf("i-%d-%d", w, i), map[string]string{"AWS_INSTANCE_PORT": "80"}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	db.Close()
	db = openDB(t, dir)
	defer db.Close()
	again, err := newBoltStore(r.lim, db, 0)
	if err != nil {
		t.Fatal(err)
	}
	sameStates(t, r.store.(*boltStore).mem, readAll(t, again, r.store.(*boltStore).mem))
	n := 0
	for _, sv := range again.mem.scopes[sc.key()].Services {
		n += len(sv.Instances)
	}
	if n != 64 {
		t.Fatalf("%d instances reloaded, want 64", n)
	}
}
