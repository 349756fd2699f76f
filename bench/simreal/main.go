// Command simreal checks that the simulator predicts the real pool: it runs
// one paced step-load trace against a real pool of the test service
// (internal/testservice, started as processes by pool/process) with a
// known per-request latency, and the same trace as a `tollgate sim`
// scenario (package sim), then plots both instance counts over time in one
// figure and prints how far apart they are at steady state.
//
//	go run ./bench/simreal -out /tmp/simreal
//
// The trace: 5 requests/s for 60 s, 20/s until 240 s, then 5/s until 300 s
// (constant spacing), each request held 400 ms by the service; instances
// take at most 4 requests at once and at most 10 run. The concurrency
// driver then asks ceil((20 × 0.4 / 4) / 0.6) = 4 instances at 20/s. The
// run takes the trace's 5 minutes of real time; requests in flight are
// bounded (at most 1,000 at once), and so is every wait.
package main

import (
	"context"
	"encoding/csv"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/internal/testservice"
	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/pool/process"
	"github.com/tollgate/tollgate/sim"
)

// The trace and the service.
var (
	steps = []struct {
		at   time.Duration
		rate float64
	}{{0, 5}, {60 * time.Second, 20}, {240 * time.Second, 5}}
	duration       = 300 * time.Second
	latency        = 400 * time.Millisecond
	maxConcurrency = 4
	maxInstances   = 10
	steadyFrom     = 180 * time.Second // the 1-minute window is full of the 20/s load
	steadyTo       = 240 * time.Second
)

func main() {
	out := flag.String("out", "", "`DIR` for simreal.svg and simreal.csv (default: a new temporary directory)")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "simreal:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	if out == "" {
		d, err := os.MkdirTemp("", "simreal-")
		if err != nil {
			return err
		}
		out = d
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	bin, err := testservice.Path()
	if err != nil {
		return err
	}
	defer testservice.Remove()

	fmt.Fprintln(os.Stderr, "simreal: running the trace against a real pool (5 minutes)…")
	real, coldStart, err := runReal(bin)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "simreal: mean cold start of the real instances %v; running the simulator with it\n", coldStart.Round(time.Millisecond))
	simulated, err := runSim(coldStart)
	if err != nil {
		return err
	}

	n := min(len(real), len(simulated))
	var sumDiff, maxDiff float64
	var steady int
	for s := int(steadyFrom / time.Second); s < int(steadyTo/time.Second) && s < n; s++ {
		d := math.Abs(float64(real[s] - simulated[s]))
		sumDiff += d
		maxDiff = max(maxDiff, d)
		steady++
	}
	if err := writeCSV(filepath.Join(out, "simreal.csv"), real, simulated); err != nil {
		return err
	}
	if err := writePlot(filepath.Join(out, "simreal.svg"), real, simulated); err != nil {
		return err
	}
	fmt.Printf("steady state %v–%v: mean |real − sim| = %.2f instances, max %.0f (real mean %.2f, sim mean %.2f)\n",
		steadyFrom, steadyTo, sumDiff/float64(max(steady, 1)), maxDiff,
		mean(real, steadyFrom, steadyTo), mean(simulated, steadyFrom, steadyTo))
	fmt.Printf("wrote %s and %s\n", filepath.Join(out, "simreal.svg"), filepath.Join(out, "simreal.csv"))
	return nil
}

func mean(xs []int, from, to time.Duration) float64 {
	sum, n := 0, 0
	for s := int(from / time.Second); s < int(to/time.Second) && s < len(xs); s++ {
		sum += xs[s]
		n++
	}
	return float64(sum) / float64(max(n, 1))
}

// rateAt is the trace's rate at t.
func rateAt(t time.Duration) float64 {
	r := 0.0
	for _, s := range steps {
		if t >= s.at {
			r = s.rate
		}
	}
	return r
}

// runReal plays the trace against a real pool and returns the number of
// ready instances at the end of each second, and the mean cold start.
func runReal(bin string) ([]int, time.Duration, error) {
	runner, err := process.New(process.Options{
		Command: bin,
		Env:     []string{testservice.EnvHost + "=127.0.0.1", testservice.EnvLatency + "=" + latency.String()},
		Logger:  slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return nil, 0, err
	}
	p := pool.New(pool.Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	err = p.Apply([]pool.ServiceSpec{{Name: "svc", Runner: runner, Engine: autoscale.Config{
		MaxConcurrency: maxConcurrency, MaxInstances: maxInstances,
	}}})
	if err != nil {
		return nil, 0, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	srv := httptest.NewServer(p.Handler("svc"))
	defer srv.Close()
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 1000}}

	var wg sync.WaitGroup
	var failed atomic.Int64
	slots := make(chan struct{}, 1000) // bound on requests in flight
	start := time.Now()
	ready := make([]int, 0, int(duration/time.Second))
	nextSample := start.Add(time.Second)
	next := start
	for {
		now := time.Now()
		if !now.Before(nextSample) {
			ready = append(ready, readyCount(p))
			nextSample = nextSample.Add(time.Second)
			if len(ready) == int(duration/time.Second) {
				break
			}
		}
		if !now.Before(next) {
			select {
			case slots <- struct{}{}:
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer func() { <-slots }()
					resp, err := client.Get(srv.URL + "/")
					if err != nil {
						failed.Add(1)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						failed.Add(1)
					}
				}()
			default:
				failed.Add(1) // over the in-flight bound: counted, not sent
			}
			next = next.Add(time.Duration(float64(time.Second) / rateAt(next.Sub(start))))
		}
		time.Sleep(min(time.Until(next), time.Until(nextSample), 10*time.Millisecond))
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		fmt.Fprintf(os.Stderr, "simreal: %d requests of the real run failed\n", n)
	}
	cs := time.Duration(p.Status()[0].ColdStart * float64(time.Second))
	return ready, cs, nil
}

func readyCount(p *pool.Pool) int {
	n := 0
	for _, in := range p.Status()[0].Instances {
		if in.State == "ready" {
			n++
		}
	}
	return n
}

// runSim plays the same trace in the simulator.
func runSim(coldStart time.Duration) ([]int, error) {
	c := sim.Clients{Name: "trace", Process: sim.Constant, Rate: steps[0].rate}
	for _, s := range steps[1:] {
		c.Steps = append(c.Steps, sim.Step{At: s.at, Rate: s.rate})
	}
	res, err := sim.Run(sim.Scenario{
		Name:     "simreal",
		Duration: duration,
		Seed:     1,
		// Cloud Map's bucket (20,000 / 1,000 per second) keeps the
		// throttle out of the way.
		Target:  sim.Target{Service: "cloudmap", Action: "DiscoverInstances"},
		Clients: []sim.Clients{c},
		Retry:   sim.Retry{Disabled: true},
		Backend: sim.Backend{
			ServiceTime:   latency,
			Distribution:  sim.Fixed,
			CPUPerRequest: 0.005, // the test service only sleeps
			ColdStart:     max(coldStart, time.Millisecond),
			Autoscale:     autoscale.Config{MaxConcurrency: maxConcurrency, MaxInstances: maxInstances},
		},
	})
	if err != nil {
		return nil, err
	}
	out := make([]int, len(res.Seconds))
	for i, s := range res.Seconds {
		out[i] = s.Ready
	}
	return out, nil
}

func writeCSV(path string, real, simulated []int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"second", "rate", "real_ready", "sim_ready"})
	for i := range min(len(real), len(simulated)) {
		w.Write([]string{strconv.Itoa(i), strconv.FormatFloat(rateAt(time.Duration(i)*time.Second), 'g', -1, 64),
			strconv.Itoa(real[i]), strconv.Itoa(simulated[i])})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func writePlot(path string, real, simulated []int) error {
	pl := plot.New()
	pl.Title.Text = "Ready instances: real pool vs simulator (same trace)"
	pl.X.Label.Text = "time (s)"
	pl.Y.Label.Text = "ready instances"
	line := func(ys []int) plotter.XYs {
		xy := make(plotter.XYs, len(ys))
		for i, y := range ys {
			xy[i].X, xy[i].Y = float64(i+1), float64(y)
		}
		return xy
	}
	realLine, err := plotter.NewLine(line(real))
	if err != nil {
		return err
	}
	simLine, err := plotter.NewLine(line(simulated))
	if err != nil {
		return err
	}
	simLine.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	realLine.Width, simLine.Width = vg.Points(1.5), vg.Points(1.5)
	simLine.Color = plotutil.Color(1)
	rates := make(plotter.XYs, len(real))
	for i := range rates {
		rates[i].X, rates[i].Y = float64(i+1), rateAt(time.Duration(i)*time.Second)/5
	}
	rateLine, err := plotter.NewLine(rates)
	if err != nil {
		return err
	}
	rateLine.Color = plotutil.Color(2)
	pl.Add(realLine, simLine, rateLine)
	pl.Legend.Add("real pool", realLine)
	pl.Legend.Add("tollgate sim", simLine)
	pl.Legend.Add("offered rate / 5 (req/s)", rateLine)
	pl.Legend.Top, pl.Legend.Left = true, true
	return pl.Save(8*vg.Inch, 4*vg.Inch, path)
}
