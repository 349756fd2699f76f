package autoscale

import "math"

// SetConfig applies new settings to a running engine, as a reload of the
// same revision does: targets, CPUs per instance, min and max instances,
// idle timeout and cold-start estimate take effect from the next call, and
// no instance is stopped or restarted by the change itself. New bounds act
// through Tick: instances are started up to a raised minimum, and surplus
// beyond a lowered maximum is scaled down as any surplus is (never a busy
// instance at once). A changed MaxConcurrency resets every ACT value to
// it, as a new deployment does. The policy is replaced by cfg.Policy, or,
// when that is nil, by the Cloud Run recommender for cfg.
//
// An invalid cfg is rejected with an error wrapping ErrInvalidConfig and
// the engine keeps its settings.
func (e *Engine) SetConfig(cfg Config) error {
	return e.setConfig(cfg, func(int) { e.NewDeployment() })
}

// setConfig validates and applies cfg, then calls maxChanged with the old
// MaxConcurrency when cfg changes it.
func (e *Engine) setConfig(cfg Config, maxChanged func(oldMax int)) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	p := cfg.Policy
	if p == nil {
		p = NewCloudRun(cfg)
	}
	oldMax := e.cfg.MaxConcurrency
	e.cfg, e.policy = cfg, p
	if cfg.MaxConcurrency != oldMax {
		maxChanged(oldMax)
	}
	return nil
}

// SetConfigShared applies cfg as SetConfig does, for a caller whose
// instances other callers also send requests to (several tollgate
// replicas sharing one Deployment's pods): cfg.MaxConcurrency is this
// caller's share of each instance's capacity, and a change of it scales
// every instance's ACT value by the same ratio (rounded, at least 1)
// rather than resetting it, since what each instance was seen to handle
// has not changed, only this caller's part of it.
func (e *Engine) SetConfigShared(cfg Config) error {
	return e.setConfig(cfg, func(oldMax int) {
		newMax := e.cfg.MaxConcurrency
		for _, in := range e.instances {
			act := int(math.Round(float64(in.act) * float64(newMax) / float64(oldMax)))
			in.act = min(max(act, 1), newMax)
		}
		e.actSum = 0
		for _, in := range e.ready {
			e.actSum += in.act
		}
	})
}

// WithDefaults returns c with every zero field set to its default, as the
// engine sees it (MinInstances stays as given: its default is zero).
func (c Config) WithDefaults() Config { return c.withDefaults() }
