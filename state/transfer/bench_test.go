package transfer_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tollgate/tollgate/awsjson"
	"github.com/tollgate/tollgate/cloudmap"
	"github.com/tollgate/tollgate/servicequotas"
	"github.com/tollgate/tollgate/state"
	"github.com/tollgate/tollgate/state/bolt"
	"github.com/tollgate/tollgate/state/transfer"
)

// records is a stream of n Cloud Map instances (100 accounts, one
// service of n/100 each) and n closed increase requests (200 accounts of
// n/200), as the stores write them.
type records struct {
	n, i int
}

func (r *records) Line() int { return r.i }

func (r *records) Next() (state.Record, error) {
	defer func() { r.i++ }()
	const perScope = 1000
	scopes := r.n / perScope
	switch i := r.i; {
	case i < scopes: // a namespace and a service per account
		return state.Record{Table: cloudmap.Table, Key: fmt.Sprintf("%012d/us-east-1\x00n:ns-%d", i, i),
			Value: fmt.Sprintf(`{"id":"ns-%d","name":"local","type":"HTTP","op_id":"op","created":1}`, i)}, nil
	case i < 2*scopes:
		i -= scopes
		return state.Record{Table: cloudmap.Table, Key: fmt.Sprintf("%012d/us-east-1\x00s:srv-%d", i, i),
			Value: fmt.Sprintf(`{"id":"srv-%d","name":"web","namespace_id":"ns-%d","type":"HTTP","created":1}`, i, i)}, nil
	case i < 2*scopes+r.n:
		i -= 2 * scopes
		s := i / perScope
		return state.Record{Table: cloudmap.Table, Key: fmt.Sprintf("%012d/us-east-1\x00i:srv-%d:i-%d", s, s, i),
			Value: fmt.Sprintf(`{"id":"i-%d","attrs":{"AWS_INSTANCE_IPV4":"10.0.%d.%d","AWS_INSTANCE_PORT":"80"},"op_id":"op-%d"}`, i, i/256%256, i%256, i)}, nil
	case i < 2*scopes+2*r.n:
		i -= 2*scopes + r.n
		acct := fmt.Sprintf("acct-%d", i%200)
		return state.Record{Table: servicequotas.Table, Key: fmt.Sprintf("req/r-%d", i),
			Value: fmt.Sprintf(`{"id":"r-%d","account":%q,"region":"us-east-1","service":"ecs","quota":"L-%d","desired":%d,"status":"APPROVED","reason":"fine","created":%d,"updated":%d,"seq":%d,"closed_seq":%d}`,
				i, acct, i, 100+i%50, i, i, 2*i+1, 2*i+2)}, nil
	}
	return state.Record{}, io.EOF
}

// BenchmarkStartWith100kInstancesAnd100kRequests measures what a start
// spends on the durable state: opening the data file (every page
// checked), and starting the registry and Service Quotas on it, side by
// side as a node does; then it touches touchScopes registry scopes and
// as many Service Quotas accounts, which reads each from the file. It
// reports each part's wall time, the CPU time the start took (comparable
// on a loaded machine), the heap held after the start and after the
// touches, and, once, the first start after the import, which builds the
// stores' indexes from the records.
func BenchmarkStartWith100kInstancesAnd100kRequests(b *testing.B) {
	const n, touchScopes = 100_000, 10
	dir := b.TempDir()
	db, err := bolt.Open(dir, bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.Import(&records{n: n}); err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	if _, err := start(db); err != nil {
		b.Fatal(err)
	}
	first := time.Since(t0)
	db.Close()
	var heap, touched int64
	var open, load, touch, cpu time.Duration
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		var before, after, later runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		cpu0 := cpuTime()
		b.StartTimer()
		t0 := time.Now()
		db, err := bolt.Open(dir, bolt.Options{})
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		st, err := start(db)
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		b.StopTimer()
		open, load, cpu = open+t1.Sub(t0), load+t2.Sub(t1), cpu+cpuTime()-cpu0
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap = int64(after.HeapAlloc) - int64(before.HeapAlloc)
		t3 := time.Now()
		st.touch(b, touchScopes)
		touch += time.Since(t3)
		runtime.GC()
		runtime.ReadMemStats(&later)
		touched = int64(later.HeapAlloc) - int64(before.HeapAlloc)
		runtime.KeepAlive(st)
		db.Close()
		b.StartTimer()
	}
	per := func(d time.Duration) float64 { return d.Seconds() / float64(b.N) }
	b.ReportMetric(first.Seconds(), "first-start-s")
	b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(touched)/(1<<20), "heap-touched-MiB")
	b.ReportMetric(per(open), "open-s")
	b.ReportMetric(per(load), "load-s")
	b.ReportMetric(per(touch)*1000/(2*touchScopes), "ms/touch")
	b.ReportMetric(per(cpu), "cpu-s")
	_ = transfer.ErrNotEmpty
}

// started is a registry and Service Quotas started on one store.
type started struct {
	reg *cloudmap.Registry
	sq  *servicequotas.Service
}

// start starts both on db at once, as a node does.
func start(db *bolt.DB) (*started, error) {
	var st started
	var g errgroup.Group
	g.Go(func() (err error) { st.reg, err = cloudmap.New(cloudmap.Options{Durable: db}); return err })
	g.Go(func() (err error) { st.sq, err = servicequotas.New(servicequotas.Options{Durable: db}); return err })
	return &st, g.Wait()
}

// touch reads k registry scopes (ListNamespaces in each) and k Service
// Quotas accounts (a decision on one of each account's closed requests,
// which is refused once the account is read) from the file.
func (st *started) touch(b *testing.B, k int) {
	for i := range k {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{}`))
		req.Header.Set("X-Amz-Target", cloudmap.TargetPrefix+".ListNamespaces")
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDBENCH/20260101/us-east-1/servicediscovery/aws4_request, SignedHeaders=host, Signature=0")
		req.Header.Set(awsjson.HeaderAccount, fmt.Sprintf("%012d", i))
		w := httptest.NewRecorder()
		st.reg.ServeHTTP(w, req)
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), fmt.Sprintf("ns-%d", i)) {
			b.Fatalf("ListNamespaces of account %d: %d %s", i, w.Code, w.Body)
		}
		if _, err := st.sq.Decide(b.Context(), fmt.Sprintf("r-%d", i), servicequotas.StatusApproved, "again"); err == nil {
			b.Fatalf("request r-%d decided again", i)
		}
	}
}

// cpuTime is the process's CPU time, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
