package servicequotas

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"testing"

	"github.com/tollgate/tollgate/state"
)

// recordList is a stream of records, for bolt.DB.Import.
type recordList struct {
	recs []state.Record
	i    int
}

func (l *recordList) Line() int { return l.i }

func (l *recordList) Next() (state.Record, error) {
	if l.i == len(l.recs) {
		return state.Record{}, io.EOF
	}
	l.i++
	return l.recs[l.i-1], nil
}

// seedRecords are the records of unmapped accounts holding
// MaxClosedUnmapped closed requests together (100 each), and of mapped
// accounts with open and closed ones.
func seedRecords(t *testing.T) []state.Record {
	t.Helper()
	var recs []state.Record
	seq := int64(0)
	add := func(account string, i int, status string, unmapped bool) {
		seq++
		rec := requestRecord{Request: Request{ID: fmt.Sprintf("%s-%d", account, i), Account: account, Region: "us-east-1", ServiceCode: "ecs",
			QuotaCode: fmt.Sprintf("L-%d", i), DesiredValue: float64(10 + i), Status: status, Created: seq, LastUpdated: seq, Unmapped: unmapped}, Seq: seq}
		if status != StatusPending {
			seq++
			rec.Closed = seq
		}
		v, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, state.Record{Table: Table, Key: recReq + rec.ID, Value: string(v)})
	}
	for i := range 100 {
		for u := range MaxClosedUnmapped / 100 {
			add(fmt.Sprintf("u-%d", u), i, StatusDenied, true)
		}
		if i < 30 {
			for a := range 10 {
				status := StatusApproved
				if i < 3 {
					status = StatusPending
				}
				add(fmt.Sprintf("m-%d", a), i, status, false)
			}
		}
	}
	return append(recs, state.Record{Table: Table, Key: recSeq, Value: fmt.Sprint(seq)})
}

// A backend that keeps at most 50 requests in memory answers every call
// as a memory backend holding everything does: accounts dropped and read
// again hold what was written, the unmapped accounts' bound forgets the
// request closed longest ago from an account not in memory, and the
// admin listing across accounts is the same page by page. A start from
// the file reads none of the requests, and then answers the same.
func TestBoltBackendDropsAndRereadsAccounts(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	recs := seedRecords(t)
	if _, err := db.Import(&recordList{recs: recs}); err != nil {
		t.Fatal(err)
	}
	cached, err := newBoltBackend(db, 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(cached.reqs) != 0 || cached.unmappedOpen != 0 || len(cached.unmappedClosed) != MaxClosedUnmapped {
		t.Fatalf("a start holds %d requests and %d unmapped closed", len(cached.reqs), len(cached.unmappedClosed))
	}
	mem := newMemoryBackend()
	if err := loadRecords(mem, func(fn func(k, v []byte) error) error {
		for _, r := range recs {
			if err := fn([]byte(r.Key), []byte(r.Value)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	same := func(what string, got, want any, gotErr, wantErr error) {
		t.Helper()
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: %v %v, memory %v %v", what, got, gotErr, want, wantErr)
		}
	}
	var backends = []backend{cached, mem}
	each := func(fn func(be backend) (any, error)) (any, any, error, error) {
		a, aerr := fn(backends[0])
		b, berr := fn(backends[1])
		return a, b, aerr, berr
	}
	listing := func(what string, f pageFilter) {
		t.Helper()
		for page := 0; ; page++ {
			got, gotNext, gotErr := cached.page(ctx, f)
			want, wantNext, wantErr := mem.page(ctx, f)
			same(fmt.Sprintf("%s page %d", what, page), got, want, gotErr, wantErr)
			same(fmt.Sprintf("%s page %d next", what, page), gotNext, wantNext, nil, nil)
			if wantNext == 0 {
				return
			}
			f.before = wantNext
		}
	}
	req := func(account string, i int, status string, unmapped bool) Request {
		return Request{ID: fmt.Sprintf("new-%s-%d", account, i), Account: account, Region: "us-east-1", ServiceCode: "ecs",
			QuotaCode: fmt.Sprintf("L-%d", i), DesiredValue: 99, Status: status, Created: 1e6, LastUpdated: 1e6, Unmapped: unmapped}
	}
	for step := range 12 {
		// A new unmapped account's closed request forgets the unmapped
		// request closed longest ago, of an account not in memory.
		a, b, aerr, berr := each(func(be backend) (any, error) {
			return nil, be.create(ctx, req(fmt.Sprint("v-", step), step, StatusApproved, true), expect{})
		})
		same("create unmapped closed", a, b, aerr, berr)
		// A mapped account's new request, a duplicate refused, and a
		// decision on a request made before the start.
		a, b, aerr, berr = each(func(be backend) (any, error) {
			return nil, be.create(ctx, req("m-1", 100+step, StatusPending, false), expect{})
		})
		same("create pending", a, b, aerr, berr)
		a, b, aerr, berr = each(func(be backend) (any, error) {
			return nil, be.create(ctx, req("m-1", 100+step, StatusPending, false), expect{})
		})
		same("create duplicate", a, b, aerr, berr)
		a, b, aerr, berr = each(func(be backend) (any, error) {
			return be.decide(ctx, fmt.Sprintf("m-%d-%d", step%10, step%3), StatusApproved, "fine", 2e6)
		})
		same("decide", a, b, aerr, berr)
		for _, id := range []string{fmt.Sprintf("u-%d-0", step), fmt.Sprintf("u-%d-99", step), "m-9-29", "new-m-1-100", "none"} {
			a, b, aerr, berr = each(func(be backend) (any, error) { return be.get(ctx, id) })
			same("get "+id, a, b, aerr, berr)
		}
		for _, account := range []string{"u-0", fmt.Sprint("u-", 49-step), "m-1", fmt.Sprint("v-", step)} {
			a, b, aerr, berr = each(func(be backend) (any, error) { return be.account(ctx, account) })
			same("account "+account, a, b, aerr, berr)
		}
	}
	listing("every request", pageFilter{limit: 700})
	listing("pending", pageFilter{limit: 7, statuses: map[string]bool{StatusPending: true}})
	listing("one account", pageFilter{account: "m-3", limit: 9})
	cached.mu.Lock()
	held := len(cached.reqs)
	cached.mu.Unlock()
	if held > 50 {
		t.Fatalf("memory holds %d requests, more than 50", held)
	}
	for _, f := range []struct {
		name      string
		got, want any
	}{{"seq", cached.seq, mem.seq}, {"unmappedOpen", cached.unmappedOpen, mem.unmappedOpen}, {"unmappedClosed", cached.unmappedClosed, mem.unmappedClosed}, {"closedAcct", cached.closedAcct, mem.closedAcct}, {"vals", cached.vals, mem.vals}} {
		same(f.name, f.got, f.want, nil, nil)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDB(t, dir)
	defer db.Close()
	again, err := newBoltBackend(db, 0)
	if err != nil {
		t.Fatal(err)
	}
	cached = again
	listing("every request after a start", pageFilter{limit: 10_000})
	sameBackend(t, mem, readAll(t, again, mem))
}
