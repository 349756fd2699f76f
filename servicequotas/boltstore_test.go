package servicequotas

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tollgate/tollgate/state/bolt"
)

func openDB(t *testing.T, dir string) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(dir, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// readAll reads into b every account want holds, and returns b's memory
// backend.
func readAll(t *testing.T, b *boltBackend, want *memoryBackend) *memoryBackend {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for account := range want.accounts {
		if err := b.need(account); err != nil {
			t.Fatal(err)
		}
	}
	return b.memoryBackend
}

// sameBackend fails unless got holds what want holds, indexes included.
func sameBackend(t *testing.T, want, got *memoryBackend) {
	t.Helper()
	for _, f := range []struct {
		name      string
		want, got any
	}{
		{"seq", want.seq, got.seq}, {"ver", want.ver, got.ver}, {"reqs", want.reqs, got.reqs},
		{"accounts", want.accounts, got.accounts}, {"unmappedOpen", want.unmappedOpen, got.unmappedOpen},
		{"unmappedClosed", want.unmappedClosed, got.unmappedClosed}, {"vals", want.vals, got.vals},
		{"unmappedVals", want.unmappedVals, got.unmappedVals}, {"tagSets", want.tagSets, got.tagSets},
		{"tagged", want.tagged, got.tagged}, {"unmappedTagged", want.unmappedTagged, got.unmappedTagged},
		{"closedAcct", want.closedAcct, got.closedAcct},
	} {
		if !reflect.DeepEqual(f.want, f.got) {
			t.Fatalf("%s differs: %.300v, reloaded %.300v", f.name, fmt.Sprint(f.want), fmt.Sprint(f.got))
		}
	}
}

// Every change reaches the file: requests made, decided and forgotten
// (beyond an account's closed bound), applied values set and removed,
// tags added and removed, from concurrent writers; a backend reloaded from
// the file holds exactly what the first one held.
func TestBoltBackendReloadsEveryChange(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	b, err := newBoltBackend(db, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var now atomic.Int64
	req := func(account string, i int, status string, unmapped bool) Request {
		n := now.Add(1)
		return Request{ID: fmt.Sprintf("%s-%d", account, i), Account: account, Region: "us-east-1", ServiceCode: "ecs",
			QuotaCode: fmt.Sprintf("q-%d", i), DesiredValue: float64(i + 1), Status: status, Created: n, LastUpdated: n, Unmapped: unmapped}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 1024)
	for w := range 8 {
		wg.Go(func() {
			account := fmt.Sprint("acct-", w%3)
			n := 40
			if w%3 == 0 {
				n = 200 // 600 in all for acct-0: beyond its closed bound
			}
			for i := range n {
				status := []string{StatusApproved, StatusDenied}[i%2]
				if i < 4 {
					status = StatusPending
				}
				i := w*1000 + i
				if err := b.create(ctx, req(account, i, status, w%3 == 2), expect{}); err != nil {
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
	if n := len(b.accounts["acct-0"].closed); n != MaxClosedPerAccount {
		t.Fatalf("acct-0 keeps %d closed requests, want %d", n, MaxClosedPerAccount)
	}
	for _, r := range b.reqs {
		if r.Status == StatusPending && r.Account == "acct-1" {
			if _, err := b.decide(ctx, r.ID, StatusApproved, "fine", now.Add(1)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.set(ctx, appliedKey("acct-0", "us-east-1", "ecs", "q-op"), 42); err != nil {
		t.Fatal(err)
	}
	if err := b.set(ctx, appliedKey("acct-0", "us-east-1", "ecs", "q-1"), 0); err != nil {
		t.Fatal(err)
	}
	for i, account := range []string{"acct-0", "acct-2"} {
		res := tagRes{account: account, key: appliedKey(account, "us-east-1", "ecs", "q-0"), unmapped: i == 1}
		if err := b.tag(ctx, res, map[string]string{"a": "1", "b": "2"}); err != nil {
			t.Fatal(err)
		}
		if err := b.untag(ctx, res, []string{"a"}); err != nil {
			t.Fatal(err)
		}
		gone := tagRes{account: account, key: appliedKey(account, "us-east-1", "ecs", "q-9")}
		if err := b.tag(ctx, gone, map[string]string{"x": "y"}); err != nil {
			t.Fatal(err)
		}
		if err := b.untag(ctx, gone, []string{"x"}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	db = openDB(t, dir)
	defer db.Close()
	again, err := newBoltBackend(db, 0)
	if err != nil {
		t.Fatal(err)
	}
	sameBackend(t, b.memoryBackend, readAll(t, again, b.memoryBackend))
}

// FuzzLoadRecords reads any record from a data file beside good ones: a
// bad one is an error naming it, never a panic, and what loads is usable.
func FuzzLoadRecords(f *testing.F) {
	f.Add("req/r-1", `{"id":"r-1","account":"a","region":"us-east-1","service":"ecs","quota":"L-1","desired":5,"status":"PENDING","created":1,"updated":1,"seq":1}`)
	f.Add("req/r-2", `{"id":"r-2","account":"a","status":"APPROVED","seq":2,"closed_seq":3}`)
	f.Add("applied/a|us-east-1|ecs|L-1", `{"value":3,"unmapped":true}`)
	f.Add("tags/a|us-east-1|ecs|L-1", `{"account":"a","tags":{"k":"v"}}`)
	f.Add("#seq", "x")
	f.Add("other", "{}")
	f.Fuzz(func(t *testing.T, key, value string) {
		m := newMemoryBackend()
		good := [][2]string{{"req/r-0", `{"id":"r-0","account":"b","region":"us-east-1","service":"ecs","quota":"L-2","desired":5,"status":"PENDING","seq":1}`}}
		err := loadRecords(m, func(fn func(k, v []byte) error) error {
			for _, kv := range append(good, [2]string{key, value}) {
				if err := fn([]byte(kv[0]), []byte(kv[1])); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			if !strings.Contains(err.Error(), "record") && !strings.Contains(err.Error(), "#") {
				t.Fatalf("%q=%q: %v does not name the record", key, value, err)
			}
			return
		}
		if _, err := m.account(t.Context(), "b"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := m.page(t.Context(), pageFilter{limit: 10}); err != nil {
			t.Fatal(err)
		}
	})
}
