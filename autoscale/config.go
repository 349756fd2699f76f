package autoscale

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// The fixed numbers of Cloud Run's autoscaler (SPEC §3). They are not
// settings: the published behaviour has them as constants.
const (
	// Tolerance is the relative band around a target inside which the
	// recommended count does not change: ±10 %, so 54 %–66 % for 60 %.
	Tolerance = 0.10

	// ACTHighCPU is the per-second CPU utilisation above which adaptive
	// concurrency throttling lowers an instance's concurrency limit by 1.
	ACTHighCPU = 0.90

	// ACTLowCPU is the per-second CPU utilisation under which an instance
	// at its concurrency limit gets the limit raised by 1.
	ACTLowCPU = 0.70

	// SurplusUtilisation is the 1-minute utilisation under which a surplus
	// (non-recommended) instance is shut down.
	SurplusUtilisation = 0.10

	// SurplusWindow is the default Config.SurplusWindow: Cloud Run's
	// minute (SPEC §3).
	SurplusWindow = time.Minute

	// MinPendingWait is the shortest time a request waits in the pending
	// queue before a new instance is started for it or, at max instances,
	// it fails with HTTP 429.
	MinPendingWait = 10 * time.Second

	// PendingColdStartFactor times the expected cold start is the pending
	// wait when that is longer than MinPendingWait.
	PendingColdStartFactor = 3.5
)

// Defaults of Config (SPEC §3); a zero field of Config takes its default.
const (
	// DefaultCPUTarget is the default Config.CPUTarget: 60 %.
	DefaultCPUTarget = 0.60

	// DefaultConcurrencyTarget is the default Config.ConcurrencyTarget: 60 %.
	DefaultConcurrencyTarget = 0.60

	// DefaultMaxConcurrency is the default Config.MaxConcurrency.
	DefaultMaxConcurrency = 80

	// DefaultCPUsPerInstance is the default Config.CPUsPerInstance, in cores.
	DefaultCPUsPerInstance = 1.0

	// DefaultMaxInstances is the default Config.MaxInstances.
	DefaultMaxInstances = 100

	// DefaultInitialColdStart is the default Config.InitialColdStart.
	DefaultInitialColdStart = 2 * time.Second

	// DefaultIdleTimeout is the default Config.IdleTimeout: Cloud Run keeps
	// an idle instance up to 15 minutes after its last request.
	DefaultIdleTimeout = 15 * time.Minute
	// DefaultGPUIdleTimeout is Config.IdleTimeout of instances with a GPU
	// (Config.GPUs), and the most it may be: Cloud Run keeps them idle 10
	// minutes at most (SPEC §3).
	DefaultGPUIdleTimeout = 10 * time.Minute
	// MaxGPUs bounds Config.GPUs.
	MaxGPUs = 8
)

// The bounds of Config.IdleTimeout. The engine decides once a second, so
// a shorter timeout would mean nothing.
const (
	// MinIdleTimeout is the shortest Config.IdleTimeout.
	MinIdleTimeout = time.Second
	// MaxIdleTimeout is the longest Config.IdleTimeout.
	MaxIdleTimeout = 24 * time.Hour
)

// MaxInstancesLimit is the largest MaxInstances a Config may set.
const MaxInstancesLimit = 100_000

// ErrInvalidConfig is wrapped by every error Config.Validate returns.
var ErrInvalidConfig = errors.New("autoscale: invalid config")

// Config holds the settings of one service revision. A zero field takes its
// default, except MinInstances, whose default is zero.
type Config struct {
	// CPUTarget is the CPU utilisation the CPU driver aims for, in (0, 1].
	// Default 0.6.
	CPUTarget float64

	// ConcurrencyTarget is the fraction of the maximum concurrency the
	// concurrency and ACT drivers aim for, in (0, 1]. Default 0.6.
	ConcurrencyTarget float64

	// MaxConcurrency is the configured maximum number of concurrent
	// requests per instance, and the ceiling of every ACT value. Default 80.
	MaxConcurrency int

	// CPUsPerInstance is the CPU allocated to one instance, in cores (the
	// sum of its containers' limits when it has sidecars). Default 1.
	CPUsPerInstance float64

	// MinInstances is kept running at all times, idle or not. Default 0.
	MinInstances int

	// MaxInstances is a strict upper bound on starting, ready and
	// draining instances together. Default 100.
	MaxInstances int

	// InitialColdStart is the expected cold start before any instance has
	// been seen to start; afterwards the mean of observed starts is used.
	// Default 2 s.
	InitialColdStart time.Duration

	// IdleTimeout is how long an instance may sit without requests before
	// it is shut down, and how long the service may go without a request
	// before its last instance is stopped (scale to zero) and CPU alone
	// stops holding instances up. It counts from the last request that
	// arrived or finished, however short. In [MinIdleTimeout,
	// MaxIdleTimeout]; default DefaultIdleTimeout (15 minutes, SPEC §3).
	IdleTimeout time.Duration

	// GPUs is the GPUs each instance has; 0 for none. Instances with a GPU
	// are kept idle at most DefaultGPUIdleTimeout (10 minutes, SPEC §3):
	// it is their default IdleTimeout, and a longer one is invalid.
	GPUs int

	// SurplusWindow is how long a surplus instance must have been ready,
	// and the span its utilisation is averaged over, before it can be shut
	// down for low utilisation. Whole seconds from 1 s to 10 minutes;
	// default SurplusWindow (a minute, as Cloud Run). A change by
	// SetConfig applies in full to instances that start after it; those
	// running keep averaging over the span they started with.
	SurplusWindow time.Duration

	// LiteralSurplusStop stops surplus instances by SPEC §3's rule alone:
	// a non-recommended instance under 10 % utilisation over the last
	// minute goes, even while requests wait pending or while the last
	// seconds' demand needs it. The 1-minute average lags a load step, so
	// this drains capacity exactly when load rises (in the simulator's
	// autoscale-step study, 18 ready instances fell to 3 as load went from
	// 50 to 400 calls/s). By default (false) a surplus instance is not
	// stopped while any request is pending, nor while it ranks within the
	// recent need: the instances that the last 6 seconds' average
	// concurrency (or the requests in flight now, if more) and CPU need at
	// the targets, as Knative's 6-second panic window measures it.
	LiteralSurplusStop bool

	// Policy recommends the instance count. Nil means the Cloud Run
	// recommender, NewCloudRun(c). A Policy keeps state: give every Engine
	// its own.
	Policy Policy
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.CPUTarget == 0 {
		c.CPUTarget = DefaultCPUTarget
	}
	if c.ConcurrencyTarget == 0 {
		c.ConcurrencyTarget = DefaultConcurrencyTarget
	}
	if c.MaxConcurrency == 0 {
		c.MaxConcurrency = DefaultMaxConcurrency
	}
	if c.CPUsPerInstance == 0 {
		c.CPUsPerInstance = DefaultCPUsPerInstance
	}
	if c.MaxInstances == 0 {
		c.MaxInstances = DefaultMaxInstances
	}
	if c.InitialColdStart == 0 {
		c.InitialColdStart = DefaultInitialColdStart
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
		if c.GPUs > 0 {
			c.IdleTimeout = DefaultGPUIdleTimeout
		}
	}
	if c.SurplusWindow == 0 {
		c.SurplusWindow = SurplusWindow
	}
	return c
}

// Validate reports whether c, with its defaults applied, is usable. Every
// error it returns wraps ErrInvalidConfig.
func (c Config) Validate() error {
	c = c.withDefaults()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	if !(c.CPUTarget > 0 && c.CPUTarget <= 1) {
		return bad("CPU target %v not in (0, 1]", c.CPUTarget)
	}
	if !(c.ConcurrencyTarget > 0 && c.ConcurrencyTarget <= 1) {
		return bad("concurrency target %v not in (0, 1]", c.ConcurrencyTarget)
	}
	if c.MaxConcurrency < 1 || c.MaxConcurrency > 1000 {
		return bad("max concurrency %d not in [1, 1000]", c.MaxConcurrency)
	}
	if !(c.CPUsPerInstance > 0) || math.IsInf(c.CPUsPerInstance, 0) || c.CPUsPerInstance > 1000 {
		return bad("CPUs per instance %v not in (0, 1000]", c.CPUsPerInstance)
	}
	if c.MaxInstances < 1 || c.MaxInstances > MaxInstancesLimit {
		return bad("max instances %d not in [1, %d]", c.MaxInstances, MaxInstancesLimit)
	}
	if c.MinInstances < 0 || c.MinInstances > c.MaxInstances {
		return bad("min instances %d not in [0, max instances %d]", c.MinInstances, c.MaxInstances)
	}
	if c.InitialColdStart < 0 || c.InitialColdStart > time.Hour {
		return bad("initial cold start %v not in [0, 1h]", c.InitialColdStart)
	}
	if c.SurplusWindow < time.Second || c.SurplusWindow > span10m*time.Second || c.SurplusWindow%time.Second != 0 {
		return bad("surplus window %v is not whole seconds in [1s, 10m0s]", c.SurplusWindow)
	}
	if c.IdleTimeout < MinIdleTimeout || c.IdleTimeout > MaxIdleTimeout {
		return bad("idle timeout %v not in [%v, %v]", c.IdleTimeout, MinIdleTimeout, MaxIdleTimeout)
	}
	if c.GPUs < 0 || c.GPUs > MaxGPUs {
		return bad("GPUs %d not in [0, %d]", c.GPUs, MaxGPUs)
	}
	if c.GPUs > 0 && c.IdleTimeout > DefaultGPUIdleTimeout {
		return bad("idle timeout %v is over %v: instances with a GPU are kept idle 10 minutes at most, as Cloud Run keeps them", c.IdleTimeout, DefaultGPUIdleTimeout)
	}
	return nil
}
