package sim

import (
	"bytes"
	"errors"
	"html"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/autoscale"
)

// splitScenario is 1,000 calls, exactly 100 a second for 10 s, to a
// backend of two revisions split by traffic; the cloudmap bucket
// (20,000/1,000) never throttles them.
func splitScenario(traffic []TrafficTarget, extra ...Clients) Scenario {
	return Scenario{
		Duration: 10 * time.Second,
		Target:   Target{Service: "cloudmap", Action: "DiscoverInstances"},
		Clients:  append([]Clients{{Name: "users", Rate: 100}}, extra...),
		Retry:    Retry{Disabled: true},
		Backend: Backend{Distribution: Fixed, ServiceTime: 50 * time.Millisecond,
			Revisions: []Revision{{}, {}}, Traffic: traffic},
	}
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// A 90/10 split of 1,000 requests lands exactly 900/100, and exactly
// 90/10 in every second (100 consecutive requests each), as
// autoscale.Split's 100 slots give it.
func TestSplitLandsExactly(t *testing.T) {
	res, err := Run(splitScenario([]TrafficTarget{{Revision: "hello-00001", Percent: 90}, {LatestRevision: true, Percent: 10}}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary.Calls != 1000 || len(res.Revisions) != 2 {
		t.Fatalf("calls %d, revisions %d", res.Summary.Calls, len(res.Revisions))
	}
	a, b := res.Revisions[0], res.Revisions[1]
	if sum(a.Requests) != 900 || sum(b.Requests) != 100 {
		t.Fatalf("split %d/%d, want 900/100", sum(a.Requests), sum(b.Requests))
	}
	for k := range res.Seconds {
		if a.Requests[k] != 90 || b.Requests[k] != 10 || a.Percent[k] != 90 || b.Percent[k] != 10 {
			t.Fatalf("second %d: %d/%d requests at %d/%d %%, want 90/10", k, a.Requests[k], b.Requests[k], a.Percent[k], b.Percent[k])
		}
	}
	if a.Name != "hello-00001" || b.Name != "hello-00002" {
		t.Errorf("names %s, %s", a.Name, b.Name)
	}
}

// A tagged call always reaches its revision, whatever its percent: 0 %
// here, so every call hello-00002 gets is the tester's.
func TestTaggedCallsReachTheirRevision(t *testing.T) {
	sc := splitScenario([]TrafficTarget{{Revision: "hello-00001", Percent: 100}, {LatestRevision: true, Tag: "canary"}},
		Clients{Name: "tester", Rate: 7, Tag: "canary"})
	res, err := Run(sc)
	if err != nil {
		t.Fatal(err)
	}
	if got := sum(res.Revisions[0].Requests); got != 1000 {
		t.Errorf("hello-00001 got %d calls, want the users' 1000", got)
	}
	if got := sum(res.Revisions[1].Requests); got != 70 || res.Groups[1].Succeeded != 70 {
		t.Errorf("hello-00002 got %d calls, tester succeeded %d; want the tester's 70", got, res.Groups[1].Succeeded)
	}
}

// A GPU service keeps its idle instance 10 minutes, not 15: one call at
// 0 starts an instance (cold start 2 s), served in 100 ms, so the service
// is idle from 2.1 s; the first tick at least the idle timeout later
// stops it: 603 s with a GPU (602.1 rounded up), 903 s without.
func TestGPUInstanceIdlesTenMinutes(t *testing.T) {
	for _, tc := range []struct {
		gpus int
		stop int
	}{{1, 603}, {0, 903}} {
		sc := Scenario{Duration: 20 * time.Minute, Target: Target{Service: "cloudmap", Action: "DiscoverInstances"},
			Clients: []Clients{{Name: "one", Burst: 1}}, Retry: Retry{Disabled: true},
			Backend: Backend{Distribution: Fixed, Autoscale: autoscaleGPUs(tc.gpus)}}
		res, err := Run(sc)
		if err != nil {
			t.Fatal(err)
		}
		first := -1
		for k, s := range res.Seconds {
			if k > 2 && s.Ready+s.Starting == 0 {
				first = k
				break
			}
		}
		if first != tc.stop || res.Seconds[tc.stop-1].Ready != 1 {
			t.Errorf("gpu %d: the instance stopped in second %d, want %d", tc.gpus, first, tc.stop)
		}
	}
}

// A warm rollout: hello-00002, deployed at 60 s with only a tag (and so
// with one instance, as Knative's initial scale), gets 10 % at 120 s,
// then more. Its share does not move before the instances that share
// needs are ready: at once when they already are, else at the instant
// the last of them is, its cold start after the tick that started it.
func TestWarmShiftWaitsForInstances(t *testing.T) {
	st, err := Preset("gradual-rollout")
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range st.Runs {
		res, err := Run(sc)
		if err != nil {
			t.Fatal(err)
		}
		cold := sc.Backend.revisionsWithDefaults()[1].ColdStart
		b := res.Revisions[1]
		moves := 0
		for _, ev := range res.TrafficLog {
			if ev.Revision != b.Name || !strings.HasPrefix(ev.Msg, "traffic moved") {
				continue
			}
			moves++
			if ev.Ready < ev.Needed || ev.Needed < 1 {
				t.Errorf("%s: %v: moved with %d ready of %d needed", sc.Name, ev.At, ev.Ready, ev.Needed)
			}
			// The change was made at a whole second (120, 240, 360 s);
			// the floor starts instances at the next tick, ready a cold
			// start later, unless they were ready already.
			atOnce := ev.At%time.Second == 0 && slices.ContainsFunc(sc.Backend.TrafficChanges, func(c TrafficChange) bool { return c.At == ev.At })
			if atOnce && b.Ready[int(ev.At/time.Second)-1] < ev.Needed {
				t.Errorf("%s: moved at once at %v without the %d instances needed ready before", sc.Name, ev.At, ev.Needed)
			}
			if got := ev.At % time.Second; !atOnce && (got != cold%time.Second || ev.At.Truncate(time.Second) < cold) {
				t.Errorf("%s: moved at %v, not a cold start (%v) after a tick", sc.Name, ev.At, cold)
			}
		}
		if moves != 3 {
			t.Fatalf("%s: %d moves, want 3: %+v", sc.Name, moves, res.TrafficLog)
		}
		// Second by second: the share grows only in a second that ends
		// with at least the instances the next log line said it needed.
		for k := 1; k < len(res.Seconds); k++ {
			if b.Percent[k] > b.Percent[k-1] && b.Ready[k] < needAt(res, b.Name, time.Duration(k)*time.Second) {
				t.Errorf("%s: second %d: share %d → %d %% with %d ready", sc.Name, k, b.Percent[k-1], b.Percent[k], b.Ready[k])
			}
		}
		// At each change the split holds until the instances are ready.
		for _, c := range sc.Backend.TrafficChanges {
			k := int(c.At / time.Second)
			if b.Percent[k] != b.Percent[k-1] && b.Ready[k-1] < needAt(res, b.Name, c.At+time.Second) {
				t.Errorf("%s: the share moved in the second of the change at %v, before any instance could start", sc.Name, c.At)
			}
		}
	}
}

// needAt is the instances the last "starting instances" line for
// revision name before at said its share needed.
func needAt(res *Result, name string, at time.Duration) int {
	n := 0
	for _, ev := range res.TrafficLog {
		if ev.Revision == name && ev.At <= at && ev.Needed > 0 {
			n = ev.Needed
		}
	}
	return n
}

// A new revision that takes 100 % starts the instances the serving load
// calls for before traffic moves, not one: the move comes exactly a cold
// start after the deployment, with all of them ready, and the old
// revision drains by its requests.
func TestRolloutStartsEnoughInstances(t *testing.T) {
	st, err := Preset("warm-rollout")
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range st.Runs {
		res, err := Run(sc)
		if err != nil {
			t.Fatal(err)
		}
		spec := sc.Backend.revisionsWithDefaults()[1]
		a, b := res.Revisions[0], res.Revisions[1]
		if b.ReadyAt != spec.At+spec.ColdStart {
			t.Errorf("%s: latest ready at %v, want the deployment %v plus the cold start %v", sc.Name, b.ReadyAt, spec.At, spec.ColdStart)
		}
		var started TrafficEvent
		for _, ev := range res.TrafficLog {
			if ev.Revision == b.Name && ev.At == b.ReadyAt {
				started = ev
			}
		}
		if started.Needed < 10 || started.Ready != started.Needed {
			t.Errorf("%s: moved with %d ready of %d needed: %+v", sc.Name, started.Ready, started.Needed, res.TrafficLog)
		}
		k := int(b.ReadyAt / time.Second)
		if b.Percent[k-1] != 0 || b.Percent[k] != 100 || b.Ready[k-1] != 0 || b.Starting[k-1] != started.Needed {
			t.Errorf("%s: second %d: %d %% with %d starting; second %d: %d %%", sc.Name, k-1, b.Percent[k-1], b.Starting[k-1], k, b.Percent[k])
		}
		if a.RetiredAt != b.ReadyAt || a.StoppedAt < a.RetiredAt || a.StoppedAt > a.RetiredAt+5*time.Second {
			t.Errorf("%s: hello-00001 retired at %v, stopped at %v", sc.Name, a.RetiredAt, a.StoppedAt)
		}
		if res.Summary.Rejected != 0 {
			t.Errorf("%s: %d calls rejected", sc.Name, res.Summary.Rejected)
		}
	}
}

// A replacement at max instances: the old revision's 10 instances finish
// their 20 s requests over max (the new one has its own 10), and go
// within the grace: once their requests are done, or at the request
// timeout, cutting off the requests of its last 10 s (4 a second).
func TestReplacementOverMax(t *testing.T) {
	st, err := Preset("replacement-over-max")
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.Run()
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		a := r.Revisions[0]
		if a.RetiredAt <= 0 || a.StoppedAt <= a.RetiredAt {
			t.Fatalf("%s: retired %v, stopped %v", r.Scenario.Name, a.RetiredAt, a.StoppedAt)
		}
		from, to := int(a.RetiredAt/time.Second)+1, int(a.StoppedAt/time.Second)
		for k := from; k < to; k++ {
			if r.Seconds[k].OverMax != 10 || a.OverMax[k] != 10 || r.Seconds[k].Ready != 20 {
				t.Errorf("%s: second %d: %d over max, %d ready", r.Scenario.Name, k, r.Seconds[k].OverMax, r.Seconds[k].Ready)
			}
		}
		for k := to; k < len(r.Seconds); k++ {
			if r.Seconds[k].OverMax != 0 {
				t.Errorf("%s: second %d: %d over max after the old revision stopped", r.Scenario.Name, k, r.Seconds[k].OverMax)
			}
		}
		grace := r.Scenario.Backend.RequestTimeout
		switch i {
		case 0: // 300 s: the requests end first, 20 s after the last began
			if d := a.StoppedAt - a.RetiredAt; d != 20*time.Second || r.Summary.Failed != 0 {
				t.Errorf("%s: drained in %v with %d failed, want 20s and none", r.Scenario.Name, d, r.Summary.Failed)
			}
		case 1: // 10 s: cut off
			if d := a.StoppedAt - a.RetiredAt; d != grace || r.Summary.Failed != 40 {
				t.Errorf("%s: stopped %v after retiring with %d failed, want %v and 40", r.Scenario.Name, d, r.Summary.Failed, grace)
			}
		}
	}
}

// RunTask on Fargate takes from three buckets, weighted by count, all or
// none: 11 calls of count 10 at once from a fresh account, the 11th is
// throttled by the tasks bucket (110 > 100) and takes from none; 11
// calls of count 1 all pass. Half a second later the tasks bucket has
// refilled 10 tokens (20 a second): one call of count 10 passes, and the
// bucket refills 10 more by 1 s.
func TestRunTaskOnFargateTakesAllOrNone(t *testing.T) {
	run := func(count int, later ...Clients) *Result {
		t.Helper()
		sc := Scenario{Duration: 2 * time.Second, Target: Target{Action: "RunTask"},
			Clients: append([]Clients{{Name: "burst", Burst: 11, Count: count, LaunchType: "FARGATE"}}, later...),
			Retry:   Retry{Disabled: true}, Backend: Backend{None: true}}
		res, err := Run(sc)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := run(10, Clients{Name: "later", Burst: 1, BurstAt: 500 * time.Millisecond, Count: 10, LaunchType: "FARGATE"})
	if g := res.Groups[0]; g.Succeeded != 10 || g.Throttled != 1 || res.Groups[1].Succeeded != 1 {
		t.Fatalf("count 10: %+v", res.Groups)
	}
	want := map[string]struct {
		taken     int64
		throttled int
		tokens    int64
	}{
		"cluster-resource-modify": {11, 0, 100}, // 100/40: 10 at 0, full by 0.25 s, 1 at 0.5 s
		"fargate-run-task":        {11, 0, 20},  // 20/20: 10 at 0, full by 0.5 s, 1 at 0.5 s
		"fargate-on-demand-tasks": {110, 1, 10}, // 100/20: 100 at 0, 10 at 0.5 s, 10 more by 1 s
	}
	if len(res.Buckets) != 3 {
		t.Fatalf("buckets %+v", res.Buckets)
	}
	for _, b := range res.Buckets {
		w, ok := want[b.Category]
		if !ok || b.Taken[0] != w.taken || b.Throttled[0] != w.throttled || b.Tokens[0] != w.tokens {
			t.Errorf("%s: took %d, throttled %d, %d tokens at 1 s; want %+v", b.Category, b.Taken[0], b.Throttled[0], b.Tokens[0], w)
		}
	}
	if res = run(1); res.Groups[0].Succeeded != 11 || res.Groups[0].Throttled != 0 {
		t.Fatalf("count 1: %+v", res.Groups)
	}
	// On Spot, the On-Demand tasks bucket is left alone.
	sc := Scenario{Duration: time.Second, Target: Target{Action: "RunTask"},
		Clients: []Clients{{Name: "spot", Burst: 11, Count: 10, CapacityProvider: "FARGATE_SPOT"}},
		Retry:   Retry{Disabled: true}, Backend: Backend{None: true}}
	if res, err := Run(sc); err != nil || res.Groups[0].Throttled != 1 || res.Buckets[2].Category != "fargate-spot-tasks" {
		t.Fatalf("spot: %v %+v", err, res)
	}
}

// Bad traffic blocks are refused as a whole, each error at its
// file:line:column and field.
func TestBadTrafficIsRefusedWithItsPlace(t *testing.T) {
	head := "backend:\n  revisions:\n    - at: 0s\n    - at: 10s\n"
	for _, tc := range []struct{ src, want string }{
		{head + "  traffic:\n    - {revision: hello-00001, percent: 90}\n",
			"t.yaml:6:5: backend.traffic: percents sum to 90, not 100"},
		{head + "  traffic_changes:\n    - at: 20s\n      traffic:\n        - {revision: hello-00003, percent: 100}\n",
			`t.yaml:8:22: backend.traffic_changes[0].traffic[0].revision: "hello-00003" is not a revision deployed by then (hello-00001 to hello-00002)`},
		{head + "  traffic:\n    - {revision: hello-00002, percent: 100}\n",
			`t.yaml:6:18: backend.traffic[0].revision: "hello-00002" is not a revision deployed by then (hello-00001 to hello-00001)`},
		{head + "  traffic:\n    - {revision: hello-00001, percent: 100, tag: a}\n    - {latest_revision: true, tag: a}\n",
			`t.yaml:7:36: backend.traffic[1].tag: "a" is already the tag of entry 0`},
		{head + "  traffic:\n    - {revision: hello-00001, percent: 100}\n    - {latest_revision: true}\n",
			"t.yaml:7:7: backend.traffic[1]: percent 0 without a tag reaches nothing"},
		{head + "  traffic:\n    - {revision: hello-00001, latest_revision: true, percent: 100}\n",
			"t.yaml:6:7: backend.traffic[0]: give either revision: NAME or latest_revision: true"},
		{head + "  traffic:\n    - {latest_revision: true, percent: 100, tag: Canary}\n",
			`t.yaml:6:50: backend.traffic[0].tag: "Canary" is not a tag`},
		{head + "  traffic:\n    - {latest_revision: true, percent: 1.5}\n",
			`t.yaml:6:40: backend.traffic[0].percent: want a whole number, got "1.5"`},
		{"backend:\n  revisions:\n    - at: 5s\n", "t.yaml:3:11: backend.revisions[0].at: the first revision is deployed at 0, not 5s"},
		{"clients:\n  - {rate: 1, tag: canary}\n", `t.yaml:2:20: clients[0].tag: tag "canary" is given by no traffic block of the backend`},
		{"clients:\n  - {rate: 1, count: 10}\n", "t.yaml:2:22: clients[0].count: count, launch_type and capacity_provider are RunTask's"},
		{"target: {action: RunTask}\nclients:\n  - {rate: 1, count: 11, launch_type: FARGATE}\n",
			"t.yaml:3:22: clients[0].count: InvalidParameterException: count must be between 1 and 10"},
		{"target: {action: RunTask}\nclients:\n  - {rate: 1, count: 2, launch_type: LAMBDA}\n",
			"t.yaml:3:38: clients[0].launch_type: InvalidParameterException: launchType must be one of"},
	} {
		_, err := ParseStudy("t.yaml", []byte(tc.src))
		if !errors.Is(err, ErrInvalidScenario) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s\nerror %v\n want %s…", tc.src, err, tc.want)
		}
	}
}

func autoscaleGPUs(n int) autoscale.Config { return autoscale.Config{GPUs: n} }

// The reports show revisions and buckets: the summary and the HTML page
// list each rollout step, and the figures have the per-revision and
// per-bucket panels.
func TestReportsShowRevisionsAndBuckets(t *testing.T) {
	for name, want := range map[string][]string{
		"warm-rollout":    {"Revisions and traffic", "instances per revision", "share of the untagged requests per revision", "over max", "new hello-00002 at 120 s", "the latest ready: traffic rerouted"},
		"fargate-runtask": {"tokens in each bucket", "Fargate tasks 100/20", "Spot tasks 100/20", "by the bucket that was short"},
	} {
		st, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		res, err := st.Run()
		if err != nil {
			t.Fatal(err)
		}
		var page, summary bytes.Buffer
		if err := WriteHTML(&page, st, res); err != nil {
			t.Fatal(err)
		}
		if err := WriteSummary(&summary, res); err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !strings.Contains(page.String(), html.EscapeString(w)) {
				t.Errorf("%s: the HTML report does not show %q", name, w)
			}
		}
		var csv bytes.Buffer
		if err := WriteCSV(&csv, res[0]); err != nil {
			t.Fatal(err)
		}
		head, _, _ := strings.Cut(csv.String(), "\n")
		wantCol := map[string]string{"warm-rollout": ",over_max,hello-00001_instances,hello-00001_percent,hello-00001_calls,hello-00002_instances",
			"fargate-runtask": ",fargate-on-demand-tasks_tokens,fargate-on-demand-tasks_throttled"}[name]
		if !strings.Contains(head, wantCol) {
			t.Errorf("%s: CSV header %s, want %s", name, head, wantCol)
		}
		if log := strings.Contains(summary.String(), "revisions and traffic of run cold-start-3s"); log != (name == "warm-rollout") {
			t.Errorf("%s: summary shows the traffic log: %v\n%s", name, log, summary.String())
		}
	}
}

// A rollback to a drained revision is a traffic change, as the pool's:
// hello-00001, retired once hello-00002 took all the traffic and
// stopped, runs again when a change names it, and takes the traffic once
// its instance is ready.
func TestTrafficChangeRunsARetiredRevisionAgain(t *testing.T) {
	sc := splitScenario(nil)
	sc.Duration = 40 * time.Second
	sc.Backend.Revisions = []Revision{{}, {At: 2 * time.Second}}
	sc.Backend.TrafficChanges = []TrafficChange{{At: 20 * time.Second, Traffic: []TrafficTarget{{Revision: "hello-00001", Percent: 100}}}}
	res, err := Run(sc)
	if err != nil {
		t.Fatal(err)
	}
	a, b := res.Revisions[0], res.Revisions[1]
	if a.StoppedAt == 0 || a.StoppedAt >= 20*time.Second {
		t.Fatalf("hello-00001 stopped at %v, want before the rollback at 20 s: %+v", a.StoppedAt, res.TrafficLog)
	}
	last := len(res.Seconds) - 1
	if a.Percent[last] != 100 || b.Percent[last] != 0 || a.Ready[last] < 1 {
		t.Fatalf("at the end: hello-00001 %d %% with %d ready, hello-00002 %d %%; want the rollback in force: %+v",
			a.Percent[last], a.Ready[last], b.Percent[last], res.TrafficLog)
	}
	for _, e := range res.TrafficLog {
		if strings.Contains(e.Msg, "refused") {
			t.Fatalf("the rollback was refused: %+v", e)
		}
	}
}
