// Command simreal checks that the simulator predicts the real pool: it runs
// one paced step-load trace against a real pool of the test service
// (internal/testservice, started as processes by pool/process) with a
// known per-request latency, and the same trace as a `tollgate sim`
// scenario (package sim), then plots both instance counts over time in one
// figure and prints how far apart they are at steady state.
//
//	go run ./bench/simreal -out /tmp/simreal
//	go run ./bench/simreal -scenario rollout -out /tmp/simreal
//
// The second runs a split and a rollout instead (rollout.go): a second
// revision deployed with a tag only, then given 10 %, 50 % and 100 % of
// the traffic through SetTraffic, as a script of the admin API would.
//
// The trace: 5 requests/s for 60 s, 16/s until 240 s, then 5/s until 300 s
// (constant spacing), each request held 400 ms by the service; instances
// take at most 4 requests at once and at most 10 run. The concurrency
// driver then asks ceil((16 × 0.4 / 4) / 0.6) = ceil(2.67) = 3 instances
// at 16/s: a need well inside the ±10 % band around 3, so the few percent
// the real pool measures above the simulator (HTTP and scheduling time on
// top of the 400 ms) do not change the count. The run takes the trace's 5
// minutes of real time; requests in flight are bounded (at most 1,000 at
// once), and so is every wait.
package main

import (
	"encoding/csv"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	}{{0, 5}, {60 * time.Second, 16}, {240 * time.Second, 5}}
	duration       = 300 * time.Second
	latency        = 400 * time.Millisecond
	maxConcurrency = 4
	maxInstances   = 10
	steadyFrom     = 180 * time.Second // the 1-minute window is full of the 16/s load
	steadyTo       = 240 * time.Second
)

// instancePorts are the ports the instances are given (-ports); the zero
// range is the process runner's default.
var instancePorts process.PortRange

func main() {
	out := flag.String("out", "", "`DIR` for the figure and the CSV (default: a new temporary directory)")
	scenario := flag.String("scenario", "step", "`NAME`: step (a step load on one revision) or rollout (a split and a rollout over two)")
	flag.Func("ports", "`LOW-HIGH`: the ports the test service's instances are given, inclusive, as serve's --instance-ports (default: 20000-31999 less the kernel's ephemeral range)", func(s string) error {
		r, err := process.ParsePortRange(s)
		instancePorts = r
		return err
	})
	flag.Parse()
	var err error
	switch *scenario {
	case "step":
		err = run(*out, runStep)
	case "rollout":
		err = run(*out, runRollout)
	default:
		err = fmt.Errorf("-scenario %q: want step or rollout", *scenario)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "simreal:", err)
		os.Exit(1)
	}
}

// run runs scenario with its output directory: out, made if missing, or
// a new temporary one.
func run(out string, scenario func(out string) error) error {
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
	return scenario(out)
}

// runStep runs the step load against a real pool and the simulator.
func runStep(out string) error {
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

	n := min(len(real.ready), len(simulated.ready))
	var sumDiff, maxDiff float64
	var steady int
	for s := int(steadyFrom / time.Second); s < int(steadyTo/time.Second) && s < n; s++ {
		d := math.Abs(float64(real.ready[s] - simulated.ready[s]))
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
	fmt.Printf("steady state %v–%v: mean |real − sim| = %.2f ready instances, max %.0f (ready: real mean %.2f, sim mean %.2f; recommended: real %.2f, sim %.2f; concurrency: real %.2f, sim in flight %.2f)\n",
		steadyFrom, steadyTo, sumDiff/float64(max(steady, 1)), maxDiff,
		mean(real.ready, steadyFrom, steadyTo), mean(simulated.ready, steadyFrom, steadyTo),
		mean(real.recommended, steadyFrom, steadyTo), mean(simulated.recommended, steadyFrom, steadyTo),
		meanF(real.concurrency, steadyFrom, steadyTo), meanF(simulated.concurrency, steadyFrom, steadyTo))
	fmt.Printf("wrote %s and %s\n", filepath.Join(out, "simreal.svg"), filepath.Join(out, "simreal.csv"))
	return nil
}

func meanF(xs []float64, from, to time.Duration) float64 {
	sum, n := 0.0, 0
	for s := int(from / time.Second); s < int(to/time.Second) && s < len(xs); s++ {
		sum += xs[s]
		n++
	}
	return sum / float64(max(n, 1))
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
func runReal(bin string) (series, time.Duration, error) {
	runner, err := process.New(process.Options{
		Command: bin,
		Env:     []string{testservice.EnvHost + "=127.0.0.1", testservice.EnvLatency + "=" + latency.String()},
		Logger:  slog.New(slog.DiscardHandler),
		Ports:   instancePorts,
	})
	if err != nil {
		return series{}, 0, err
	}
	p, stop, err := runPool([]pool.ServiceSpec{{Name: "svc", Runner: runner, Engine: autoscale.Config{
		MaxConcurrency: maxConcurrency, MaxInstances: maxInstances,
	}}})
	if err != nil {
		return series{}, 0, err
	}
	defer stop()
	var out series
	failed := trace{seconds: int(duration / time.Second), rate: rateAt, sample: func() {
		st := p.Status()[0]
		conc := 0.0
		for _, in := range st.Instances {
			conc += in.Concurrency
		}
		out.add(readyCount(p), st.Recommended, conc)
	}}.play(p, "svc")
	if failed > 0 {
		fmt.Fprintf(os.Stderr, "simreal: %d requests of the real run failed\n", failed)
	}
	cs := time.Duration(p.Status()[0].ColdStart * float64(time.Second))
	return out, cs, nil
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

// series is one run's time series, one entry per second.
type series struct {
	ready, recommended []int
	concurrency        []float64 // requests in flight, averaged over the second
}

func (s *series) add(ready, rec int, conc float64) {
	s.ready = append(s.ready, ready)
	s.recommended = append(s.recommended, rec)
	s.concurrency = append(s.concurrency, conc)
}

// runSim plays the same trace in the simulator.
func runSim(coldStart time.Duration) (series, error) {
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
		return series{}, err
	}
	var out series
	for _, s := range res.Seconds {
		out.add(s.Ready, s.Recommended, float64(s.InFlight))
	}
	return out, nil
}

func writeCSV(path string, real, simulated series) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"second", "rate", "real_ready", "sim_ready", "real_recommended", "sim_recommended", "real_concurrency", "sim_in_flight"})
	f64 := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	for i := range min(len(real.ready), len(simulated.ready)) {
		w.Write([]string{strconv.Itoa(i + 1), f64(rateAt(time.Duration(i) * time.Second)),
			strconv.Itoa(real.ready[i]), strconv.Itoa(simulated.ready[i]),
			strconv.Itoa(real.recommended[i]), strconv.Itoa(simulated.recommended[i]),
			f64(real.concurrency[i]), f64(simulated.concurrency[i])})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func writePlot(path string, realS, simS series) error {
	real, simulated := realS.ready, simS.ready
	pl := plot.New()
	pl.Title.Text = "Ready instances: real pool vs simulator (same trace)"
	pl.X.Label.Text = "time (s)"
	pl.Y.Label.Text = "ready instances"
	realLine, err := plotter.NewLine(intLine(real))
	if err != nil {
		return err
	}
	simLine, err := plotter.NewLine(intLine(simulated))
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
	if err := pl.Save(8*vg.Inch, 4*vg.Inch, strings.TrimSuffix(path, ".svg")+".png"); err != nil {
		return err
	}
	return pl.Save(8*vg.Inch, 4*vg.Inch, path)
}
