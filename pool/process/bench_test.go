package process_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testservice"
	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/pool/process"
)

// BenchmarkStartReady measures start-to-ready of the test service through
// the runner (TCP readiness) and its Stop; compare with
// BenchmarkStartReadyDirect, the same process started and polled by hand,
// to see the runner's overhead. The supervised cases start it through
// this test binary as the instance supervisor, as serve does through
// tollgate, or through the tollgate binary named by
// TOLLGATE_BENCH_SUPERVISOR (go build -o /tmp/tollgate ./cmd/tollgate):
// "fresh" starts a supervisor for each instance (each Start's context
// ends with it, so the runner keeps no spare), "spare" hands each
// instance to the runner's warm spare supervisor, which is given (untimed)
// the time to start and 100 ms to settle after the previous instance, as
// it has when a service scales from zero; spare-used/op says how many
// starts found one.
func BenchmarkStartReady(b *testing.B) {
	for _, tc := range []struct {
		name                        string
		noCgroup, supervised, spare bool
	}{
		{"cgroup", false, false, false},
		{"proc", true, false, false},
		{"supervised-fresh-cgroup", false, true, false},
		{"supervised-fresh-proc", true, true, false},
		{"supervised-spare-cgroup", false, true, true},
		{"supervised-spare-proc", true, true, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			log, _ := testLogger(nil)
			opts := process.Options{Command: testservice.Build(b), Logger: log, NoCgroup: tc.noCgroup}
			if tc.supervised {
				opts.Supervisor = supervisor(b)
				if exe := os.Getenv("TOLLGATE_BENCH_SUPERVISOR"); exe != "" {
					opts.Supervisor = []string{exe, process.SupervisorCommand}
				}
			}
			r, err := process.New(opts)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			// One instance first, untimed: the runner's first start is
			// without a spare, and the page cache warms.
			var ready time.Duration
			spares := 0
			for n := 0; n == 0 || b.Loop(); n++ {
				ctx, cancel := context.WithCancel(context.Background())
				if tc.spare {
					cancel = func() {} // the spare lives as long as the runner
					b.StopTimer()
					for deadline := time.Now().Add(5 * time.Second); n > 0 && process.SparePID(r) == 0 && time.Now().Before(deadline); {
						time.Sleep(time.Millisecond)
					}
					if process.SparePID(r) != 0 {
						spares++
					}
					time.Sleep(100 * time.Millisecond)
					b.StartTimer()
				}
				start := time.Now()
				inst, err := r.Start(ctx, pool.InstanceSpec{Service: "bench", Revision: "bench-1", ID: strconv.Itoa(n)})
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				if err := inst.Ready(context.Background()); err != nil {
					b.Fatal(err)
				}
				if n > 0 {
					ready += time.Since(start)
				}
				_ = inst.Stop(10 * time.Second)
			}
			b.ReportMetric(float64(ready.Microseconds())/float64(b.N)/1000, "ms-to-ready/op")
			if tc.spare {
				b.ReportMetric(float64(spares)/float64(b.N), "spare-used/op")
			}
		})
	}
}

// BenchmarkStartReadyDirect is the baseline: exec, poll a TCP connect
// every millisecond, SIGTERM and wait.
func BenchmarkStartReadyDirect(b *testing.B) {
	bin := testservice.Build(b)
	var ready time.Duration
	for b.Loop() {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		addr := l.Addr().String()
		_, port, _ := net.SplitHostPort(addr)
		l.Close()
		start := time.Now()
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "PORT="+port)
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		for {
			if c, err := net.Dial("tcp", addr); err == nil {
				c.Close()
				break
			}
			time.Sleep(time.Millisecond)
		}
		ready += time.Since(start)
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	b.ReportMetric(float64(ready.Microseconds())/float64(b.N)/1000, "ms-to-ready/op")
}
