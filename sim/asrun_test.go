package sim

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/retry"
)

// asRunStudies are the studies whose runs WriteScenario must reproduce:
// the presets, the reference file and Go-API scenarios a file could not
// write field for field (nil schedule, zero Exponential, no jitter, no
// backend, no retries).
func asRunStudies(t *testing.T) map[string]*Study {
	t.Helper()
	out := map[string]*Study{}
	for _, name := range PresetNames() {
		st, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = st
	}
	ref, err := LoadStudy("testdata/reference.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out["reference"] = ref
	lim, err := bucket.NewLimit(7, 2.5)
	if err != nil {
		t.Fatal(err)
	}
	out["go-api"] = &Study{Runs: []Scenario{
		{Name: "zero", Duration: 20 * time.Second},
		{Name: "lockstep", Duration: 20 * time.Second, Seed: 9, Limit: lim,
			Clients: []Clients{{Name: "herd", Rate: 3, Burst: 40, BurstAt: 2 * time.Second, Steps: []Step{{At: 5 * time.Second, Rate: 0.5}}}},
			Retry:   Retry{Schedule: WithoutJitter(retry.Exponential{}), MaxAttempts: 4, Deadline: -1, Budget: Budget{Kind: RatioBudget}},
			Backend: Backend{Policy: KPA, Distribution: Fixed}},
		{Name: "constant", Duration: 10 * time.Second, Retry: Retry{Schedule: retry.Constant(1500 * time.Millisecond), Budget: Budget{Kind: TokenBudget}, No429: true}},
		{Name: "single", Duration: 10 * time.Second, Retry: Retry{Disabled: true}, Backend: Backend{None: true}},
	}}
	return out
}

// TestWriteScenarioRunsAgain checks that the scenario WriteScenario prints
// for a run parses as a scenario file and runs the same run: the same time
// series, totals and per-group totals, and, written again, the same file.
func TestWriteScenarioRunsAgain(t *testing.T) {
	for name, st := range asRunStudies(t) {
		results, err := st.Run()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, r := range results {
			var buf bytes.Buffer
			if err := WriteScenario(&buf, r); err != nil {
				t.Fatalf("%s/%s: %v", name, r.Scenario.Name, err)
			}
			again, err := ParseStudy("as-run.yaml", buf.Bytes())
			if err != nil {
				t.Fatalf("%s/%s: the printed scenario does not parse: %v\n%s", name, r.Scenario.Name, err, buf.String())
			}
			if len(again.Runs) != 1 {
				t.Fatalf("%s/%s: %d runs, want 1", name, r.Scenario.Name, len(again.Runs))
			}
			r2, err := Run(again.Runs[0])
			if err != nil {
				t.Fatalf("%s/%s: the printed scenario does not run: %v\n%s", name, r.Scenario.Name, err, buf.String())
			}
			if r2.Scenario.Name != r.Scenario.Name || r2.Limit != r.Limit ||
				!reflect.DeepEqual(r2.Summary, r.Summary) || !reflect.DeepEqual(r2.Groups, r.Groups) || !reflect.DeepEqual(r2.Seconds, r.Seconds) {
				t.Errorf("%s/%s: the printed scenario gives another run: summary %+v, want %+v\n%s", name, r.Scenario.Name, r2.Summary, r.Summary, buf.String())
			}
			var buf2 bytes.Buffer
			if err := WriteScenario(&buf2, r2); err != nil {
				t.Fatal(err)
			}
			if buf2.String() != buf.String() {
				t.Errorf("%s/%s: written twice, the scenario changed:\n%s\nthen\n%s", name, r.Scenario.Name, buf.String(), buf2.String())
			}
		}
	}
}

// TestWriteScenarioDefaults checks that the printed scenario spells out the
// defaults a run used rather than zero values.
func TestWriteScenarioDefaults(t *testing.T) {
	r, err := Run(Scenario{Name: "zero", Duration: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteScenario(&buf, r); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"schedule: exponential", "base: 1s", "max: 32s", "deadline: 5m0s",
		"capacity: 50", "refill_per_second: 20", `account: "123456789012"`,
		"cpu_target: 0.6", "max_instances: 100", "idle_timeout: 15m0s", "policy: cloudrun",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the printed scenario lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{": 0s", "<nil>", "{Unit", "!!"} {
		if strings.Contains(out, bad) {
			t.Errorf("the printed scenario holds %q:\n%s", bad, out)
		}
	}
}
