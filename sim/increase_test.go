package sim

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestQuotaIncreasePresetStopsThrottles: a tenant at 40/s against the
// default 50/20 is throttled 20 times every second until an operator
// approves its increase to 100/60 at t = 60 s; from the next second on
// nothing is throttled. Counts are exact: constant arrivals on the virtual
// clock.
func TestQuotaIncreasePresetStopsThrottles(t *testing.T) {
	st, err := Preset("quota-increase")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(st.Runs[0])
	if err != nil {
		t.Fatal(err)
	}
	if res.Limit.String() != "50/20" || len(res.LimitChanges) != 1 {
		t.Fatalf("limit %v, changes %+v", res.Limit, res.LimitChanges)
	}
	if c := res.LimitChanges[0]; c.At != 60*time.Second || c.Limit.String() != "100/60" || c.Why != "approved by an operator" {
		t.Fatalf("change %+v", c)
	}
	for i, s := range res.Seconds {
		switch {
		case i >= 3 && i < 60 && (s.Throttled != 20 || s.Admitted != 20):
			t.Errorf("second %d before the approval: %d throttled, %d admitted; want 20 and 20", i, s.Throttled, s.Admitted)
		case i == 60 && (s.Throttled == 0 || s.Throttled+s.Admitted != 40):
			t.Errorf("second 60: %d throttled, %d admitted; want the debt of the old bucket paid within it", s.Throttled, s.Admitted)
		case i > 60 && (s.Throttled != 0 || s.Admitted != 40):
			t.Errorf("second %d after the approval: %d throttled, %d admitted; want 0 and 40", i, s.Throttled, s.Admitted)
		}
	}
}

// TestQuotaIncreaseWithoutApprovalKeepsThrottling: the preset's run with the
// request left PENDING is throttled to the end, so the test above sees the
// approval and not something else.
func TestQuotaIncreaseWithoutApprovalKeepsThrottling(t *testing.T) {
	st, err := Preset("quota-increase")
	if err != nil {
		t.Fatal(err)
	}
	if st.Runs[1].Name != "left-pending" {
		t.Fatalf("run 1 is %q", st.Runs[1].Name)
	}
	res, err := Run(st.Runs[1])
	if err != nil {
		t.Fatal(err)
	}
	if len(res.LimitChanges) != 0 {
		t.Fatalf("changes %+v without an approval", res.LimitChanges)
	}
	for i := 3; i < len(res.Seconds); i++ {
		if s := res.Seconds[i]; s.Throttled != 20 {
			t.Fatalf("second %d: %d throttled, want 20", i, s.Throttled)
		}
	}
}

// TestQuotaPolicyApprovesAtOnce: with quota_policy auto-approving up to 3×
// the default, the request at 30 s is APPROVED when it is made and the
// throttles stop then, with no operator.
func TestQuotaPolicyApprovesAtOnce(t *testing.T) {
	st, err := ParseStudy("policy.yaml", []byte(`
name: policy
duration: 60s
clients: [{rate: 40}]
backend: {none: true}
retry: {schedule: none}
increases: [{at: 30s, burst: 100, rate: 60}]
quota_policy: {auto_approve_factor: 3}
`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(st.Runs[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(res.LimitChanges) != 1 || res.LimitChanges[0].At != 30*time.Second || res.LimitChanges[0].Why != "approved by the policy" {
		t.Fatalf("changes %+v", res.LimitChanges)
	}
	if s := res.Seconds[29]; s.Throttled != 20 {
		t.Fatalf("second 29: %d throttled, want 20", s.Throttled)
	}
	for i := 31; i < 60; i++ {
		if s := res.Seconds[i]; s.Throttled != 0 {
			t.Fatalf("second %d: %d throttled, want 0", i, s.Throttled)
		}
	}
}

func TestIncreaseBadInput(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"increases: [{at: 10s, burst: 100, approve_at: 5s}]", "bad.yaml:1:47: increases[0].approve_at: approve_at 5s must be in [at, 1m0s]"},
		{"increases: [{at: 10s}]", "increases[0].burst: an increase asks for a burst, a rate or both"},
		{"increases: [{at: 2m, rate: 30}]", "increases[0].at: at 2m0s must be in [0, 1m0s]"},
		{"increases: [{at: 1s, rate: -1}]", "increases[0].rate"},
		{"limit: {capacity: 10, refill_per_second: 1}\nincreases: [{at: 1s, rate: 30}]", "give limit or increases, not both"},
		{"quota_policy: {max: -1}\nincreases: [{at: 1s, rate: 30}]", "quota_policy: rule 0: auto_approve_up_to and max must be numbers >= 0"},
		{"increases: [{at: 1s, rate: 30, when: 2s}]", "bad.yaml:1:32: increases[0].when: unknown field (known: approve_at, at, burst, rate)"},
	} {
		_, err := ParseStudy("bad.yaml", []byte(tc.yaml))
		if err == nil || !errors.Is(err, ErrInvalidScenario) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
	}
	// A request Service Quotas refuses (not above the current value) stops
	// the run with the API's message.
	_, err := Run(Scenario{Duration: 10 * time.Second, Backend: Backend{None: true},
		Increases: []Increase{{At: time.Second, Burst: 10}}})
	var fe *FieldError
	if !errors.As(err, &fe) || pathString(fe.Path) != "increases[0]" || !strings.Contains(err.Error(), "not above the current value 50") {
		t.Fatalf("%v", err)
	}
}
