package main

// This file is the rollout scenario (-scenario rollout): one constant
// load over a service whose second revision is deployed with a tag only,
// then takes 10 %, 50 % and 100 % of the traffic through SetTraffic (the
// admin API's PUT), on a real pool and in the simulator; it compares each
// revision's ready instances and share of the requests, step by step, and
// checks that each step's receiving revision had the instances its new
// share needed before the share moved.

import (
	"encoding/csv"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/internal/testservice"
	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/pool/process"
	"github.com/tollgate/tollgate/pool/traffic"
	"github.com/tollgate/tollgate/sim"
)

// The rollout: 16 requests/s of 400 ms (6.4 in flight), instances of 4
// requests at once, so the concurrency driver asks ceil(6.4 × share /
// 4 / 0.6) instances of a revision: 3 at 100 % and at 90 %, 1 at 10 %,
// 2 at 50 %, none of them on a rounding edge.
var (
	rolloutRate     = 16.0
	rolloutDuration = 240 * time.Second
	deployAt        = 40 * time.Second // hello-00002, tag canary, no share
	rolloutSteps    = []rolloutStep{
		{60 * time.Second, 10},
		{120 * time.Second, 50},
		{180 * time.Second, 100},
	}
	revNames = []string{"hello-00001", "hello-00002"}
)

// rolloutStep gives hello-00002 percent of the traffic at a time.
type rolloutStep struct {
	at      time.Duration
	percent int
}

// stepTraffic is the traffic block of a step, as both take it.
func stepTraffic(percent int) []traffic.Target {
	if percent == 100 {
		return []traffic.Target{{LatestRevision: true, Percent: 100}}
	}
	return []traffic.Target{{RevisionName: revNames[0], Percent: 100 - percent},
		{LatestRevision: true, Percent: percent, Tag: "canary"}}
}

func simTraffic(t []traffic.Target) []sim.TrafficTarget {
	out := make([]sim.TrafficTarget, len(t))
	for i, e := range t {
		out[i] = sim.TrafficTarget{Revision: e.RevisionName, LatestRevision: e.LatestRevision, Percent: e.Percent, Tag: e.Tag}
	}
	return out
}

// revSeries is one run's per-revision series, one entry per second.
type revSeries struct {
	ready    [2][]int
	percent  [2][]int
	requests [2][]int
}

func (s *revSeries) add(ready, percent, requests [2]int) {
	for k := range 2 {
		s.ready[k] = append(s.ready[k], ready[k])
		s.percent[k] = append(s.percent[k], percent[k])
		s.requests[k] = append(s.requests[k], requests[k])
	}
}

func runRollout(out string) error {
	bin, err := testservice.Path()
	if err != nil {
		return err
	}
	defer testservice.Remove()
	fmt.Fprintln(os.Stderr, "simreal: running the rollout against a real pool (4 minutes)…")
	real, coldStart, err := rolloutReal(bin)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "simreal: mean cold start of the real instances %v; running the simulator with it\n", coldStart.Round(time.Millisecond))
	simulated, err := rolloutSim(coldStart)
	if err != nil {
		return err
	}
	printRollout(os.Stdout, real, simulated)
	if err := writeRolloutCSV(filepath.Join(out, "rollout.csv"), real, simulated); err != nil {
		return err
	}
	if err := writeRolloutPlot(filepath.Join(out, "rollout.svg"), real, simulated); err != nil {
		return err
	}
	fmt.Printf("wrote %s and %s\n", filepath.Join(out, "rollout.svg"), filepath.Join(out, "rollout.csv"))
	return nil
}

// rolloutReal plays the rollout against a real pool of the test service.
func rolloutReal(bin string) (revSeries, time.Duration, error) {
	runner := func(version string) (pool.Runner, error) {
		return process.New(process.Options{
			Command: bin,
			Env: []string{testservice.EnvHost + "=127.0.0.1", testservice.EnvLatency + "=" + latency.String(),
				"VERSION=" + version},
			Logger: slog.New(slog.DiscardHandler),
			Ports:  instancePorts,
		})
	}
	spec := func(version string, traffic []traffic.Target) ([]pool.ServiceSpec, error) {
		r, err := runner(version)
		if err != nil {
			return nil, err
		}
		return []pool.ServiceSpec{{Name: "hello", Runner: r, Template: version, Traffic: traffic,
			Engine: autoscale.Config{MaxConcurrency: maxConcurrency, MaxInstances: maxInstances}}}, nil
	}
	s, err := spec("v1", nil)
	if err != nil {
		return revSeries{}, 0, err
	}
	p, stop, err := runPool(s)
	if err != nil {
		return revSeries{}, 0, err
	}
	var steps sync.WaitGroup
	defer func() { stop(); steps.Wait() }()

	var (
		mu       sync.Mutex
		pids     = map[int]int{} // pid → revision index, from the status
		answered [2]int          // this second's answers, by revision
		unknown  int
	)
	refreshPIDs := func() { // mu is held
		for _, in := range p.Status()[0].Instances {
			for k, name := range revNames {
				if in.Revision == name && in.PID > 0 {
					pids[in.PID] = k
				}
			}
		}
	}
	var series revSeries
	var eventErr error
	events := 0 // the deployment, then the steps
	failed := trace{
		seconds: int(rolloutDuration / time.Second),
		rate:    func(time.Duration) float64 { return rolloutRate },
		before: func(t time.Duration) {
			switch k := events - 1; {
			case events == 0 && t >= deployAt:
				events++
				s, err := spec("v2", []traffic.Target{{RevisionName: revNames[0], Percent: 100}, {LatestRevision: true, Tag: "canary"}})
				if err == nil {
					err = p.Apply(s)
				}
				if err != nil && eventErr == nil {
					eventErr = err
				}
			case events > 0 && k < len(rolloutSteps) && t >= rolloutSteps[k].at:
				events++
				steps.Go(func() { // SetTraffic holds until the share has moved
					if err := p.SetTraffic("hello", stepTraffic(rolloutSteps[k].percent)); err != nil {
						fmt.Fprintln(os.Stderr, "simreal: SetTraffic:", err)
					}
				})
			}
		},
		sample: func() {
			var ready, percent [2]int
			mu.Lock()
			refreshPIDs()
			requests := answered
			answered = [2]int{}
			mu.Unlock()
			for _, in := range p.Status()[0].Instances {
				for k, name := range revNames {
					if in.Revision == name && in.State == "ready" {
						ready[k]++
					}
				}
			}
			if ts, err := p.Revisions("hello"); err == nil {
				for _, rv := range ts.Revisions {
					for k, name := range revNames {
						if rv.Name == name {
							percent[k] = rv.Percent
						}
					}
				}
			}
			series.add(ready, percent, requests)
		},
		answered: func(body []byte) {
			pid, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(string(body), "ok ")))
			mu.Lock()
			defer mu.Unlock()
			k, ok := pids[pid]
			if !ok {
				refreshPIDs()
				k, ok = pids[pid]
			}
			if ok {
				answered[k]++
			} else {
				unknown++
			}
		},
	}.play(p, "hello")
	if eventErr != nil {
		return revSeries{}, 0, fmt.Errorf("deploying the second revision: %w", eventErr)
	}
	if failed > 0 {
		fmt.Fprintf(os.Stderr, "simreal: %d requests of the real run failed\n", failed)
	}
	if unknown > 0 {
		fmt.Fprintf(os.Stderr, "simreal: %d answers from an instance no longer listed\n", unknown)
	}
	cs := time.Duration(p.Status()[0].ColdStart * float64(time.Second))
	return series, cs, nil
}

// rolloutSim plays the rollout in the simulator.
func rolloutSim(coldStart time.Duration) (revSeries, error) {
	changes := make([]sim.TrafficChange, len(rolloutSteps))
	for i, st := range rolloutSteps {
		changes[i] = sim.TrafficChange{At: st.at, Traffic: simTraffic(stepTraffic(st.percent))}
	}
	res, err := sim.Run(sim.Scenario{
		Name:     "simreal-rollout",
		Duration: rolloutDuration,
		Seed:     1,
		Target:   sim.Target{Service: "cloudmap", Action: "DiscoverInstances"},
		Clients:  []sim.Clients{{Name: "trace", Process: sim.Constant, Rate: rolloutRate}},
		Retry:    sim.Retry{Disabled: true},
		Backend: sim.Backend{
			ServiceTime:   latency,
			Distribution:  sim.Fixed,
			CPUPerRequest: 0.005,
			ColdStart:     max(coldStart, time.Millisecond),
			Autoscale:     autoscale.Config{MaxConcurrency: maxConcurrency, MaxInstances: maxInstances},
			Revisions: []sim.Revision{{}, {At: deployAt, Traffic: []sim.TrafficTarget{
				{Revision: revNames[0], Percent: 100}, {LatestRevision: true, Tag: "canary"}}}},
			TrafficChanges: changes,
		},
	})
	if err != nil {
		return revSeries{}, err
	}
	var out revSeries
	byName := map[string]sim.RevisionSeries{}
	for _, rv := range res.Revisions {
		byName[rv.Name] = rv
	}
	for s := range res.Seconds {
		var ready, percent, requests [2]int
		for k, name := range revNames {
			if rv, ok := byName[name]; ok && s < len(rv.Ready) {
				ready[k], percent[k], requests[k] = rv.Ready[s], rv.Percent[s], rv.Requests[s]
			}
		}
		out.add(ready, percent, requests)
	}
	return out, nil
}

// printRollout prints, for the last 30 s of each step, each revision's
// mean ready instances and share of the requests in both runs, and for
// each step the receiving revision's ready instances in the second its
// share moved.
func printRollout(w io.Writer, real, simulated revSeries) {
	fmt.Fprintln(w, "window      revision      ready real  ready sim  share real  share sim")
	ends := []time.Duration{rolloutSteps[0].at, rolloutSteps[1].at, rolloutSteps[2].at, rolloutDuration}
	for _, end := range ends {
		from := end - 30*time.Second
		for k, name := range revNames {
			fmt.Fprintf(w, "%3.0f–%3.0f s   %s   %9.2f  %9.2f  %9.1f %%  %8.1f %%\n", from.Seconds(), end.Seconds(), name,
				mean(real.ready[k], from, end), mean(simulated.ready[k], from, end),
				share(real, k, from, end), share(simulated, k, from, end))
		}
	}
	for _, st := range rolloutSteps {
		need := int(math.Ceil(float64(st.percent) / 100 * rolloutRate * latency.Seconds() / float64(maxConcurrency) / 0.6))
		fmt.Fprintf(w, "step to %3d %%: %s needs %d; ready when its share moved: real %s, sim %s\n", st.percent, revNames[1], need,
			readyAtMove(real, st), readyAtMove(simulated, st))
	}
}

// share is revision k's percent of the answered requests in [from, to).
func share(s revSeries, k int, from, to time.Duration) float64 {
	var mine, all int
	for i := int(from / time.Second); i < int(to/time.Second) && i < len(s.requests[k]); i++ {
		mine += s.requests[k][i]
		all += s.requests[0][i] + s.requests[1][i]
	}
	return 100 * float64(mine) / float64(max(all, 1))
}

// readyAtMove is hello-00002's ready instances in the first second its
// share reached the step's, and when that was.
func readyAtMove(s revSeries, st rolloutStep) string {
	for i := int(st.at / time.Second); i < len(s.percent[1]); i++ {
		if s.percent[1][i] >= st.percent {
			return fmt.Sprintf("%d (at %d s)", s.ready[1][i], i+1)
		}
	}
	return "never moved"
}

func writeRolloutCSV(path string, real, simulated revSeries) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	head := []string{"second"}
	for _, run := range []string{"real", "sim"} {
		for _, name := range revNames {
			head = append(head, run+"_"+name+"_ready", run+"_"+name+"_percent", run+"_"+name+"_requests")
		}
	}
	w.Write(head)
	for i := range min(len(real.ready[0]), len(simulated.ready[0])) {
		row := []string{strconv.Itoa(i + 1)}
		for _, s := range []revSeries{real, simulated} {
			for k := range revNames {
				row = append(row, strconv.Itoa(s.ready[k][i]), strconv.Itoa(s.percent[k][i]), strconv.Itoa(s.requests[k][i]))
			}
		}
		w.Write(row)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func writeRolloutPlot(path string, real, simulated revSeries) error {
	pl := plot.New()
	pl.Title.Text = "Rollout 10 → 50 → 100 %: ready instances per revision, real pool vs simulator"
	pl.X.Label.Text = "time (s)"
	pl.Y.Label.Text = "ready instances"
	for k, name := range revNames {
		for j, run := range []revSeries{real, simulated} {
			l, err := plotter.NewLine(intLine(run.ready[k]))
			if err != nil {
				return err
			}
			l.Color, l.Width = plotutil.Color(k), vg.Points(1.5)
			label := name + ", real pool"
			if j == 1 {
				l.Dashes, label = []vg.Length{vg.Points(4), vg.Points(3)}, name+", tollgate sim"
			}
			pl.Add(l)
			pl.Legend.Add(label, l)
		}
	}
	pl.Legend.Top, pl.Legend.Left = true, true
	pl.Y.Max *= 1.6 // room for the legend above the lines
	if err := pl.Save(8*vg.Inch, 4*vg.Inch, strings.TrimSuffix(path, ".svg")+".png"); err != nil {
		return err
	}
	return pl.Save(8*vg.Inch, 4*vg.Inch, path)
}
