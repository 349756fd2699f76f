package transfer_test

import (
	"fmt"
	"io"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

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
// checked), and loading 100,000 Cloud Map instances and 100,000 quota
// requests into the registry and Service Quotas, side by side as a node
// does. It reports each part's wall time, the CPU time the start took
// (comparable on a loaded machine) and the heap the loaded state holds.
func BenchmarkStartWith100kInstancesAnd100kRequests(b *testing.B) {
	const n = 100_000
	dir := b.TempDir()
	db, err := bolt.Open(dir, bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.Import(&records{n: n}); err != nil {
		b.Fatal(err)
	}
	db.Close()
	var heap uint64
	var open, load, cpu time.Duration
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		var before, after runtime.MemStats
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
		// Both at once, as a node loads them.
		var reg *cloudmap.Registry
		var sq *servicequotas.Service
		var g errgroup.Group
		g.Go(func() (err error) { reg, err = cloudmap.New(cloudmap.Options{Durable: db}); return err })
		g.Go(func() (err error) { sq, err = servicequotas.New(servicequotas.Options{Durable: db}); return err })
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		b.StopTimer()
		open, load, cpu = open+t1.Sub(t0), load+t2.Sub(t1), cpu+cpuTime()-cpu0
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap = after.HeapAlloc - before.HeapAlloc
		runtime.KeepAlive(reg)
		runtime.KeepAlive(sq)
		db.Close()
		b.StartTimer()
	}
	per := func(d time.Duration) float64 { return d.Seconds() / float64(b.N) }
	b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
	b.ReportMetric(per(open), "open-s")
	b.ReportMetric(per(load), "load-s")
	b.ReportMetric(per(cpu), "cpu-s")
	_ = transfer.ErrNotEmpty
}

// cpuTime is the process's CPU time, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
