package sim

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/retry"
)

func TestPresetsParseAndDescribeThemselves(t *testing.T) {
	names := PresetNames()
	want := []string{"autoscale-step", "ecs-burst", "fargate-runtask", "gpu-service", "gradual-rollout", "quota-increase",
		"replacement-over-max", "thundering-herd", "traffic-split", "warm-rollout"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("presets %v, want %v", names, want)
	}
	for _, n := range names {
		st, err := Preset(n)
		if err != nil {
			t.Fatal(err)
		}
		if st.Name != n || st.Description == "" || len(st.Runs) < 2 { // every preset compares runs
			t.Errorf("%s: name %q, %d runs", n, st.Name, len(st.Runs))
		}
	}
	if _, err := Preset("../sim"); !errors.Is(err, ErrInvalidScenario) {
		t.Errorf("bad preset name: %v", err)
	}
}

// TestPresetsNeverSpeakOfTheSeed: users never saw the seed document, so
// the presets (their files, descriptions and run names, all printed or
// plotted by tollgate sim) name each policy for what it is (issue 9, D3).
// The random seed (seed:, --seed) is fine.
func TestPresetsNeverSpeakOfTheSeed(t *testing.T) {
	seed := regexp.MustCompile(`(?i)\bthe seed\b|seed's|seed[ -](jitter|schedule|backoff|policy)`)
	for _, n := range PresetNames() {
		b, err := presetFiles.ReadFile("presets/" + n + ".yaml")
		if err != nil {
			t.Fatal(err)
		}
		texts := []string{string(b)}
		st, err := Preset(n)
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, st.Description)
		for _, r := range st.Runs {
			texts = append(texts, r.Name)
		}
		for _, text := range texts {
			if m := seed.FindString(text); m != "" {
				t.Errorf("preset %s speaks of %q", n, m)
			}
		}
	}
}

func TestPresetThunderingHerdRuns(t *testing.T) {
	st, err := Preset("thundering-herd")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.Runs[0].Retry.Schedule.(withoutJitter); !ok {
		t.Fatalf("no-jitter run has schedule %T", st.Runs[0].Retry.Schedule)
	}
	if _, ok := st.Runs[2].Retry.Schedule.(retry.FullJitter); !ok {
		t.Fatalf("full-jitter run has schedule %T", st.Runs[2].Retry.Schedule)
	}
	res, err := st.Run()
	if err != nil {
		t.Fatal(err)
	}
	noJitter, full := res[0].Summary, res[2].Summary
	// Lockstep retries are throttled more and finish later.
	if noJitter.Throttled <= full.Throttled || noJitter.P99Latency <= full.P99Latency {
		t.Fatalf("no jitter %+v\nfull jitter %+v", noJitter, full)
	}
}

func TestParseStudyVariantsReplaceBlocks(t *testing.T) {
	st, err := ParseStudy("v.yaml", []byte(`
name: v
duration: 30s
seed: 3
clients:
  - {name: a, process: poisson, rate: 12, burst: 40, burst_at: 5s, steps: [{at: 10s, rate: 3}]}
retry: {schedule: constant, base: 2s, max_attempts: 4, deadline: 20s, no_429: true, use_retry_after: true, budget: {kind: ratio, ratio: 0.5, burst: 3}}
backend: {policy: kpa, service_time: 50ms, distribution: fixed, max_instances: 7}
runs:
  - name: base
  - name: other
    seed: 9
    retry: {schedule: none}
`))
	if err != nil {
		t.Fatal(err)
	}
	if st.Name != "v" || len(st.Runs) != 2 {
		t.Fatalf("%+v", st)
	}
	a, b := st.Runs[0], st.Runs[1]
	c := a.Clients[0]
	if a.Name != "base" || a.Seed != 3 || a.Duration != 30*time.Second || c.Process != Poisson || c.Rate != 12 ||
		c.Burst != 40 || c.BurstAt != 5*time.Second || len(c.Steps) != 1 || c.Steps[0] != (Step{At: 10 * time.Second, Rate: 3}) {
		t.Fatalf("base %+v", a)
	}
	if a.Retry.Schedule != retry.Constant(2*time.Second) || a.Retry.MaxAttempts != 4 || a.Retry.Deadline != 20*time.Second ||
		!a.Retry.No429 || !a.Retry.UseRetryAfter || a.Retry.Budget != (Budget{Kind: RatioBudget, Ratio: 0.5, Burst: 3}) {
		t.Fatalf("base retry %+v", a.Retry)
	}
	if a.Backend.Policy != KPA || a.Backend.ServiceTime != 50*time.Millisecond || a.Backend.Distribution != Fixed || a.Backend.Autoscale.MaxInstances != 7 {
		t.Fatalf("base backend %+v", a.Backend)
	}
	if b.Name != "other" || b.Seed != 9 || !b.Retry.Disabled || b.Backend.Policy != KPA || b.Clients[0].Rate != 12 {
		t.Fatalf("variant %+v", b)
	}
}

func TestParseStudyErrorsNameFileAndLine(t *testing.T) {
	for file, want := range map[string]string{
		"unknown-field.yaml": "testdata/unknown-field.yaml:7:3: retry.jiter: unknown field, did you mean \"jitter\"? (known: base, budget, deadline, jitter, max, max_attempts, no_429, schedule, use_retry_after)",
		"bad-values.yaml":    `testdata/bad-values.yaml:9:15: runs[1].backend.policy: unknown policy "vpa"`,
		"bad-schedule.yaml":  `testdata/bad-schedule.yaml:3:13: retry.schedule: unknown schedule "fibonacci"`,
		"bad-duration.yaml":  `testdata/bad-duration.yaml:2:11: duration: want a duration such as "1.5s", "200ms" or "10m", got "30"`,
		"bad-step.yaml":      "testdata/bad-step.yaml:6:14: clients[0].steps[1].at: at 10s must not be negative",
		"bad-limit.yaml":     "testdata/bad-limit.yaml:3:3: limit: bucket: invalid limit",
		"two-docs.yaml":      "testdata/two-docs.yaml:2: a second YAML document",
		"same-names.yaml":    `testdata/same-names.yaml:5:11: runs[1].name: a second run named "a"`,
	} {
		_, err := LoadStudy("testdata/" + file)
		if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrInvalidScenario) {
			t.Errorf("%s: error %v, want %q", file, err, want)
		}
	}
	if _, err := LoadStudy("testdata/missing.yaml"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	for _, src := range []string{"", "- a\n- b\n", "name: [", strings.Repeat("#", MaxFileSize+1)} {
		if _, err := ParseStudy("x.yaml", []byte(src)); !errors.Is(err, ErrInvalidScenario) {
			t.Errorf("%.20q: error %v", src, err)
		}
	}
}

func TestParseStudyReportsEveryFieldErrorWithLineColumnAndPath(t *testing.T) {
	src := `name: typos
duration: 30s
clients:
  - rat: 10
    steps:
      - {at: 5s, rate: fast}
retry:
  schedule: exponential
  jitter: maybe
backend: &b
  policy: cloudrun
  max_instance: 4
runs:
  - name: a
    backend:
      <<: *b
      polcy: kpa
  - name: b
    seed: -1
    clients: {rate: 5}
    duration: 1s
    duration: 2s
limit: {capacity: 1.5, refill_per_second: 2}
`
	_, err := ParseStudy("typos.yaml", []byte(src))
	if !errors.Is(err, ErrInvalidScenario) {
		t.Fatalf("error %v does not wrap ErrInvalidScenario", err)
	}
	want := []string{
		"typos.yaml:4:5: clients[0].rat: unknown field, did you mean \"rate\"? (known: action, burst, burst_at, capacity_provider, count, launch_type, name, process, rate, steps, sticky_key, tag)",
		`typos.yaml:6:24: clients[0].steps[0].rate: want a number, got "fast"`,
		`typos.yaml:9:11: retry.jitter: want true or false, got "maybe"`,
		"typos.yaml:12:3: backend.max_instance: unknown field, did you mean \"max_instances\"? (known: ",
		"typos.yaml:17:7: runs[0].backend.polcy: unknown field, did you mean \"policy\"? (known: ",
		`typos.yaml:19:11: runs[1].seed: want a whole number, not negative, got "-1"`,
		"typos.yaml:20:14: runs[1].clients: want a list, got a mapping",
		"typos.yaml:22:5: runs[1].duration: given twice",
		`typos.yaml:23:19: limit.capacity: want a whole number, got "1.5"`,
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d errors, want %d:\n%v", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("error %d:\n got %s\nwant %s…", i, lines[i], w)
		}
	}
	var fe *FileError
	if !errors.As(err, &fe) || fe.Line != 4 || fe.Column != 5 || fe.Field != "clients[0].rat" {
		t.Errorf("first FileError %+v", fe)
	}
	if strings.Contains(err.Error(), "struct {") || strings.Contains(err.Error(), `yaml:"`) {
		t.Errorf("error shows Go types: %v", err)
	}
}

func TestParseStudyAliasesAreWalkedOnce(t *testing.T) {
	// Each level doubles the aliases: walking them all would take 2^40
	// steps. Each anchored node is checked once per type.
	var b strings.Builder
	b.WriteString("name: laughs\nx0: &a0 {rate: 1}\n")
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&b, "x%d: &a%d [*a%d, *a%d]\n", i, i, i-1, i-1)
	}
	_, err := ParseStudy("laughs.yaml", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "laughs.yaml:2:1: x0: unknown field") {
		t.Fatalf("error %v", err)
	}
}

func FuzzParseStudy(f *testing.F) {
	for _, n := range PresetNames() {
		data, err := presetFiles.ReadFile("presets/" + n + ".yaml")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	entries, _ := os.ReadDir("testdata")
	for _, e := range entries {
		if data, err := os.ReadFile("testdata/" + e.Name()); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := ParseStudy("fuzz.yaml", data)
		if err != nil {
			if !errors.Is(err, ErrInvalidScenario) {
				t.Fatalf("error does not wrap ErrInvalidScenario: %v", err)
			}
			// Errors speak of the file's fields, never of Go types.
			if msg := err.Error(); strings.Contains(msg, "struct {") || strings.Contains(msg, "sim.") {
				t.Fatalf("error shows Go types: %v", msg)
			}
			return
		}
		if len(st.Runs) == 0 {
			t.Fatal("parsed study without runs")
		}
		for _, sc := range st.Runs {
			if err := sc.Validate(); err != nil {
				t.Fatalf("parsed scenario is invalid: %v", err)
			}
			// Small scenarios run too: a valid scenario always runs.
			if d := sc.withDefaults(); d.Duration <= 10*time.Minute && d.expectedCalls() <= 2000 {
				// Bound the retries: a 1 ms schedule may retry 300,000
				// times per call within the deadline.
				if sc.Retry.MaxAttempts == 0 || sc.Retry.MaxAttempts > 10 {
					sc.Retry.MaxAttempts = 10
				}
				// Bound the instances observed every second.
				a := &sc.Backend.Autoscale
				if a.MinInstances > 50 {
					continue
				}
				if a.MaxInstances == 0 || a.MaxInstances > 200 {
					a.MaxInstances = 200
				}
				if _, err := Run(sc); err != nil {
					t.Fatalf("valid scenario failed to run: %v", err)
				}
			}
		}
	})
}

func TestReferenceFileHasEveryField(t *testing.T) {
	st, err := LoadStudy("testdata/reference.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a := st.Runs[0]
	if len(st.Runs) != 2 || a.Limit.String() != "100/40" || len(a.Clients) != 2 || a.Clients[1].Action != "ListClusters" ||
		a.Retry.Budget.Kind != RatioBudget || a.Backend.Autoscale.MaxConcurrency != 80 ||
		a.Backend.Autoscale.IdleTimeout != 15*time.Minute {
		t.Fatalf("%+v", st)
	}
	res, err := st.Run()
	if err != nil {
		t.Fatal(err)
	}
	// The burst plus Poisson calls averaging 10/s for 20 s and 30/s for 20 s.
	if c := res[0].Summary.Calls - 120; res[0].Limit.String() != "100/40" || c < 700 || c > 900 || res[0].Groups[1].Calls != 120 {
		t.Fatalf("%+v", res[0].Summary)
	}
}

// TestActionDidYouMean: an action one typo away from one of the target
// service gets a suggestion.
func TestActionDidYouMean(t *testing.T) {
	_, err := ParseStudy("s.yaml", []byte("clients:\n  - {name: a, rate: 1, action: ListCluster}\n"))
	if want := `clients[0].action: unknown action: "ListCluster" is not an action of ecs (did you mean "ListClusters"?)`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want %q", err, want)
	}
	_, err = ParseStudy("s.yaml", []byte("target: {service: ecz}\n"))
	if want := `(did you mean "ecs"?)`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want %q", err, want)
	}
}
