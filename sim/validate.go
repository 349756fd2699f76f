package sim

// This file checks a scenario: every invalid field named by its path,
// with a "did you mean" for a misspelt target.

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/internal/suggest"
	"github.com/tollgate/tollgate/quota"
)

// FieldError is an invalid field of a Scenario.
type FieldError struct {
	// Path locates the field: mapping keys (as a scenario file spells
	// them) and list indexes, e.g. ["clients", 0, "rate"].
	Path []any
	// Msg says what is wrong.
	Msg string
	// Err is the underlying error, if any.
	Err error
}

// Error formats the path and message, e.g. "clients[0].rate: rate -1 must
// be in [0, 1e+06]".
func (e *FieldError) Error() string { return pathString(e.Path) + ": " + e.Msg }

// Is reports whether target is ErrInvalidScenario.
func (e *FieldError) Is(target error) bool { return target == ErrInvalidScenario }

// Unwrap returns the underlying error, if any.
func (e *FieldError) Unwrap() error { return e.Err }

func pathString(path []any) string {
	var b strings.Builder
	for _, p := range path {
		switch p := p.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", p)
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			fmt.Fprint(&b, p)
		}
	}
	return b.String()
}

func invalid(path []any, format string, args ...any) error {
	return &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)}
}

func validRate(r float64) bool { return r >= 0 && r <= MaxRate && !math.IsNaN(r) }

// Validate reports whether Run can run s: nil, or an error wrapping
// ErrInvalidScenario, a *FieldError naming the bad field.
func (s Scenario) Validate() error {
	own := make([]bool, len(s.Clients))
	for i, c := range s.Clients {
		own[i] = c.Action != ""
	}
	given := s.Target
	s = s.withDefaults()
	if err := s.validate(); err != nil {
		return err
	}
	for i, c := range s.Clients {
		if _, _, err := s.Quota.Resolve(s.Target.Service, s.Target.Account, s.Target.Region, c.Action); err != nil {
			path := targetPath(given, err)
			if i < len(own) && own[i] && errors.Is(err, quota.ErrUnknownAction) {
				path = []any{"clients", i, "action"}
			}
			return &FieldError{Path: path, Msg: err.Error() + s.suggestion(c.Action, err), Err: err}
		}
		if _, err := s.charges(i); err != nil {
			return err
		}
	}
	return nil
}

// targetPath is the field of target, as the scenario gave it, that err
// (of quota.Config.Resolve) is about: target.service or target.action
// when the scenario set it, else target.
func targetPath(given Target, err error) []any {
	switch {
	case errors.Is(err, quota.ErrUnknownService) && given.Service != "":
		return []any{"target", "service"}
	case errors.Is(err, quota.ErrUnknownAction) && given.Action != "":
		return []any{"target", "action"}
	}
	return []any{"target"}
}

// suggestion is the "did you mean" for a target Resolve refused: the
// nearest service of the quota config, or action of the target service.
func (s Scenario) suggestion(action string, err error) string {
	switch {
	case errors.Is(err, quota.ErrUnknownService):
		var names []string
		for _, svc := range s.Quota.Services() {
			names = append(names, svc.Name)
		}
		return suggest.DidYouMean(s.Target.Service, names)
	case errors.Is(err, quota.ErrUnknownAction):
		svc, ok := s.Quota.Service(s.Target.Service)
		if !ok {
			return ""
		}
		var names []string
		for _, c := range svc.Categories {
			names = append(names, c.Actions...)
		}
		return suggest.DidYouMean(action, names)
	}
	return ""
}

// validate checks a scenario with its defaults applied. Its errors are
// *FieldError.
func (s Scenario) validate() error {
	if s.Duration < 0 || s.Duration > MaxDuration {
		return invalid([]any{"duration"}, "duration %v must be in (0, %v]", s.Duration, MaxDuration)
	}
	for i, c := range s.Clients {
		p := func(f ...any) []any { return append([]any{"clients", i}, f...) }
		switch c.Process {
		case Constant, Poisson:
		default:
			return invalid(p("process"), "unknown process %q (want %q or %q)", c.Process, Constant, Poisson)
		}
		if !validRate(c.Rate) {
			return invalid(p("rate"), "rate %v must be in [0, %v]", c.Rate, MaxRate)
		}
		var prev time.Duration
		for j, st := range c.Steps {
			if !validRate(st.Rate) {
				return invalid(p("steps", j, "rate"), "rate %v must be in [0, %v]", st.Rate, MaxRate)
			}
			if st.At < 0 || (j > 0 && st.At <= prev) {
				return invalid(p("steps", j, "at"), "at %v must not be negative and must come after the previous step", st.At)
			}
			prev = st.At
		}
		if c.Burst < 0 || c.Burst > MaxBurst {
			return invalid(p("burst"), "burst %d must be in [0, %d]", c.Burst, MaxBurst)
		}
		if c.BurstAt < 0 {
			return invalid(p("burst_at"), "burst_at %v must not be negative", c.BurstAt)
		}
	}
	if err := s.validIncreases(); err != nil {
		return err
	}
	if n := s.expectedCalls(); n > MaxCalls {
		return invalid([]any{"clients"}, "the clients would make about %.3g calls in %v, more than %d", n, s.Duration, MaxCalls)
	}
	r := s.Retry
	if r.MaxAttempts < 0 {
		return invalid([]any{"retry", "max_attempts"}, "max_attempts %d must not be negative", r.MaxAttempts)
	}
	switch r.Budget.Kind {
	case NoBudget, TokenBudget, RatioBudget:
	default:
		return invalid([]any{"retry", "budget", "kind"}, "unknown budget %q (want %q or %q)", r.Budget.Kind, TokenBudget, RatioBudget)
	}
	if !(r.Budget.Ratio >= 0 && r.Budget.Ratio <= 1e6) {
		return invalid([]any{"retry", "budget", "ratio"}, "ratio %v must be in [0, 1e6]", r.Budget.Ratio)
	}
	if !(r.Budget.Burst >= 0 && r.Budget.Burst <= 1e9) {
		return invalid([]any{"retry", "budget", "burst"}, "burst %v must be in [0, 1e9]", r.Budget.Burst)
	}
	b := s.Backend
	if b.ServiceTime < 0 || b.ServiceTime > time.Hour {
		return invalid([]any{"backend", "service_time"}, "service_time %v must be in (0, 1h]", b.ServiceTime)
	}
	switch b.Distribution {
	case Exponential, Fixed:
	default:
		return invalid([]any{"backend", "distribution"}, "unknown distribution %q (want %q or %q)", b.Distribution, Exponential, Fixed)
	}
	if !(b.CPUPerRequest > 0 && b.CPUPerRequest <= 1e3) {
		return invalid([]any{"backend", "cpu_per_request"}, "cpu_per_request %v must be in (0, 1000]", b.CPUPerRequest)
	}
	if b.ColdStart < 0 || b.ColdStart > time.Hour {
		return invalid([]any{"backend", "cold_start"}, "cold_start %v must be in (0, 1h]", b.ColdStart)
	}
	switch b.Policy {
	case CloudRun, KPA, HPA:
	default:
		return invalid([]any{"backend", "policy"}, "unknown policy %q (want %q, %q or %q)", b.Policy, CloudRun, KPA, HPA)
	}
	if a := b.Autoscale; a.MaxInstances > MaxInstances || a.MinInstances > MaxInstances {
		return invalid([]any{"backend", "max_instances"}, "min and max instances must be at most %d in a simulation", MaxInstances)
	}
	if err := b.Autoscale.Validate(); err != nil {
		return &FieldError{Path: []any{"backend"}, Msg: err.Error(), Err: err}
	}
	if err := s.validRevisions(); err != nil {
		return err
	}
	maxInst := b.Autoscale.MaxInstances
	if maxInst == 0 {
		maxInst = autoscale.DefaultMaxInstances
	}
	// Max instances bounds each revision: a service of several may run
	// that many per revision.
	maxInst *= max(1, len(b.Revisions))
	if secs := int64(s.Duration / time.Second); int64(maxInst)*max(secs, 1) > MaxInstanceSeconds {
		return invalid([]any{"backend", "max_instances"}, "max_instances %d over %v (all revisions) could need %d instance-seconds of simulation, more than %d", maxInst, s.Duration, int64(maxInst)*secs, MaxInstanceSeconds)
	}
	return nil
}
