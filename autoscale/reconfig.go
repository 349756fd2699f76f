package autoscale

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
		e.NewDeployment()
	}
	return nil
}
