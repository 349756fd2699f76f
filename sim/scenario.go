package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/retry"
	"github.com/tollgate/tollgate/servicequotas"
)

// ErrInvalidScenario is wrapped by every error about a scenario that cannot
// run: a bad Scenario given to Run, or a bad scenario file.
var ErrInvalidScenario = errors.New("sim: invalid scenario")

// Defaults of a Scenario; a zero field takes its default.
const (
	// DefaultDuration is how much virtual time a run covers.
	DefaultDuration = 60 * time.Second
	// DefaultService, DefaultAccount, DefaultRegion and DefaultAction name
	// the API action the clients call: ECS DescribeClusters, whose
	// "cluster-read" bucket holds 50 tokens and refills 20 per second.
	DefaultService = "ecs"
	DefaultAccount = "123456789012"
	DefaultRegion  = "us-east-1"
	DefaultAction  = "DescribeClusters"
	// DefaultRate is the rate, in calls per second, of the one client
	// group of a scenario that gives no clients.
	DefaultRate = 10.0
	// DefaultServiceTime is the mean time the backend takes per request.
	DefaultServiceTime = 100 * time.Millisecond
	// DefaultCPUPerRequest is the CPU, in cores, a running request uses.
	DefaultCPUPerRequest = 0.05
	// DefaultColdStart is how long a new backend instance takes to start.
	DefaultColdStart = 2 * time.Second
	// MaxDuration bounds Scenario.Duration.
	MaxDuration = 24 * time.Hour
	// MaxRate bounds every arrival rate, in calls per second.
	MaxRate = 1e6
	// MaxBurst bounds Clients.Burst.
	MaxBurst = 1_000_000
	// MaxInstances bounds Backend.Autoscale.MaxInstances and MinInstances
	// in a simulation: every instance is observed every virtual second.
	MaxInstances = 10_000
	// MaxCalls bounds the first attempts a scenario's clients can make
	// (rates integrated over the duration, plus bursts), which bounds a
	// run's time and memory.
	MaxCalls = 10_000_000
	// MaxInstanceSeconds bounds Backend.Autoscale.MaxInstances × Duration in
	// seconds: every instance is observed every virtual second.
	MaxInstanceSeconds = 100_000_000
)

// Process is an arrival process: how a client group spaces its calls.
type Process string

// The arrival processes.
const (
	// Constant spaces calls exactly 1/rate apart, the first at the start of
	// each rate segment. It is the default.
	Constant Process = "constant"
	// Poisson draws exponentially distributed gaps of mean 1/rate.
	Poisson Process = "poisson"
)

// Distribution is the distribution of the backend's service time.
type Distribution string

// The service-time distributions.
const (
	// Exponential service times have the configured mean. It is the default.
	Exponential Distribution = "exponential"
	// Fixed service times all equal the configured mean.
	Fixed Distribution = "fixed"
)

// PolicyName names an autoscaling policy of package autoscale.
type PolicyName string

// The autoscaling policies.
const (
	// CloudRun is autoscale.NewCloudRun, the default.
	CloudRun PolicyName = "cloudrun"
	// KPA is autoscale.NewKnativeKPA.
	KPA PolicyName = "kpa"
	// HPA is autoscale.NewKubernetesHPA.
	HPA PolicyName = "hpa"
)

// BudgetKind names a client-side retry budget of package retry.
type BudgetKind string

// The retry budgets.
const (
	// NoBudget does not bound retries. It is the default.
	NoBudget BudgetKind = ""
	// TokenBudget is retry.DefaultTokenBudget, the AWS SDK's.
	TokenBudget BudgetKind = "token"
	// RatioBudget is retry.NewRatioBudget(Budget.Ratio, Budget.Burst).
	RatioBudget BudgetKind = "ratio"
)

// Scenario describes one simulation run. The zero Scenario is a minute of 10
// ECS DescribeClusters calls per second retried with truncated exponential
// backoff and additive jitter (retry.DefaultSchedule) and served by a Cloud
// Run backend.
type Scenario struct {
	// Name labels the run in reports.
	Name string
	// Duration is the virtual time covered, rounded up to a whole second;
	// DefaultDuration when zero.
	// Calls still running at the end are counted as unfinished.
	Duration time.Duration
	// Seed seeds the run's random source (PCG); equal seeds give equal
	// results.
	Seed uint64
	// Target is the API action the clients call.
	Target Target
	// Quota resolves Target to its bucket; quota.Default() when nil.
	Quota *quota.Config
	// Limit, when not zero, replaces the limit Quota gives the target's
	// category: a quota increase.
	Limit bucket.Limit
	// Increases are Service Quotas increase requests on the target's
	// category during the run; see Increase.
	Increases []Increase
	// QuotaPolicy decides Increases as they are made, as a tollgate's
	// servicequotas policy does; the zero Policy leaves every request
	// PENDING until its ApproveAt.
	QuotaPolicy servicequotas.Policy
	// Clients are the groups of callers; one group of DefaultRate calls per
	// second when empty.
	Clients []Clients
	// Retry is how clients retry throttled and rejected calls.
	Retry Retry
	// Backend serves the admitted calls.
	Backend Backend
	// RecordRetries keeps every retry's wait in Result.RetryLog.
	RecordRetries bool
}

// timesCalls reports whether a call's latency can be other than zero in
// s: it waits for a backend or between attempts. Without either, every
// call is one decision, answered at once, and its latency tells nothing.
func (s *Scenario) timesCalls() bool { return !s.Backend.None || !s.Retry.Disabled }

// hasInstances reports whether s runs backend instances.
func (s *Scenario) hasInstances() bool { return !s.Backend.None }

// Target names one API action of one account in one region.
type Target struct {
	// Service is a service of the quota config; DefaultService when empty.
	Service string
	// Account is the calling account; DefaultAccount when empty.
	Account string
	// Region is the region called; DefaultRegion when empty.
	Region string
	// Action is the API action; DefaultAction when empty.
	Action string
}

// Step changes a client group's rate from time At on.
type Step struct {
	// At is when the new rate starts, from the start of the run.
	At time.Duration
	// Rate is the new rate in calls per second; 0 pauses the group.
	Rate float64
}

// Clients is a group of callers sharing an arrival process and a retry budget.
type Clients struct {
	// Name labels the group.
	Name string
	// Process spaces the calls; Constant when empty.
	Process Process
	// Rate is the calls per second from time 0 until the first step.
	Rate float64
	// Steps change the rate at given times, in increasing order of At.
	Steps []Step
	// Burst calls all start at the instant BurstAt, on top of the rate: a
	// thundering herd.
	Burst int
	// BurstAt is when the burst starts.
	BurstAt time.Duration
	// Action, when not empty, replaces the scenario's Target.Action for
	// this group (another action of the same account and region).
	Action string
	// Tag, when set, sends the group's admitted calls to the revision
	// with that tag (a Cloud Run tagged URL), whatever its percent; a tag
	// no revision has at the time fails the call (HTTP 404).
	Tag string
	// StickyKey, when set, is the client key every call of the group
	// carries (a user id header, a cookie, a client address): the backend
	// splits them as a sticky service (traffic.Sticky) does, by
	// autoscale.Split.PickKey over its revisions laid oldest first, so
	// they all reach one revision while the split stays. Groups without
	// it are split per request. Not with Tag, which would win.
	StickyKey string
	// Count, LaunchType and CapacityProvider are the group's RunTask
	// parameters (count, launchType, a capacityProviderStrategy of one
	// provider) for an action whose cost depends on its request body
	// (quota.Service.Weighted: ECS RunTask): each call then takes from
	// every bucket quota.Service.Charges names for that body, all or
	// none, as the gateway does. Count 0 leaves count out (1 task).
	Count            int
	LaunchType       string
	CapacityProvider string
}

// Retry is the client retry policy. The zero Retry is the default policy:
// retry.DefaultSchedule (exponential backoff with additive jitter: 1+r,
// 2+r, 4+r … seconds, at most 32 s), a 300 s deadline, no attempt cap, no budget, and
// backend 429s retried like throttles.
type Retry struct {
	// Disabled makes every call a single attempt.
	Disabled bool
	// Schedule gives the wait before each retry; retry.DefaultSchedule()
	// when nil. Wrap a schedule in WithoutJitter to make its waits
	// deterministic.
	Schedule retry.Schedule
	// MaxAttempts caps attempts per call, first included; 0 means no cap.
	MaxAttempts int
	// Deadline bounds a call, waits included, from its first attempt:
	// a retry whose wait would cross it is not made. retry.DefaultDeadline
	// when zero; negative means none.
	Deadline time.Duration
	// Budget bounds the retries of each client group.
	Budget Budget
	// No429 fails calls the backend rejects with HTTP 429 instead of
	// retrying them.
	No429 bool
	// UseRetryAfter makes clients wait at least the throttle's Retry-After
	// (the time until the bucket holds a token again, as tollgate's native
	// API sends it), capped at retry.DefaultMaxHint, like retry.Policy.Wait.
	UseRetryAfter bool
}

// Budget selects a client retry budget of package retry, one per client group.
type Budget struct {
	// Kind is the kind of budget; NoBudget when empty.
	Kind BudgetKind
	// Ratio and Burst shape a RatioBudget; retry.DefaultRetryRatio and
	// 10 when zero.
	Ratio, Burst float64
}

// Backend is the autoscaled service behind the throttle.
type Backend struct {
	// None removes the backend: admitted calls succeed at once.
	None bool
	// ServiceTime is the mean time a request runs; DefaultServiceTime when
	// zero.
	ServiceTime time.Duration
	// Distribution of service times; Exponential when empty.
	Distribution Distribution
	// CPUPerRequest is the CPU in cores a running request uses;
	// DefaultCPUPerRequest when zero. An instance's reported CPU is capped
	// at its CPUs.
	CPUPerRequest float64
	// ColdStart is how long a new instance takes to become ready;
	// DefaultColdStart when zero.
	ColdStart time.Duration
	// Policy picks the recommender; CloudRun when empty.
	Policy PolicyName
	// Autoscale holds the engine's settings; its Policy field is ignored
	// (set Policy above). Zero fields take autoscale's defaults. Every
	// revision has these, each its own engine: max instances bounds each
	// revision, as on Cloud Run. Autoscale.GPUs > 0 keeps idle instances
	// 10 minutes, not 15.
	Autoscale autoscale.Config
	// Service names the service; its revisions are SERVICE-00001, ...
	// DefaultServiceName when empty.
	Service string
	// Revisions are the service's revisions, the first deployed at 0;
	// one revision when empty. Each new one rolls out as the pool rolls a
	// changed template out: started with the instances its share of the
	// serving load needs, the latest ready revision once they are ready
	// (or after RolloutTimeout).
	Revisions []Revision
	// Traffic is the service's traffic block at the start (once the
	// revisions deployed at 0 exist); empty gives 100 % to the latest
	// ready revision.
	Traffic []TrafficTarget
	// TrafficChanges replace the traffic block at their times (warm
	// rollouts), in time order.
	TrafficChanges []TrafficChange
	// RequestTimeout bounds how long a revision left without traffic may
	// drain its requests, with MaxOverMaxGrace; DefaultRequestTimeout
	// when zero.
	RequestTimeout time.Duration
	// RolloutTimeout bounds how long a rollout or traffic change waits
	// for the receiving revision's instances; DefaultRolloutTimeout when
	// zero.
	RolloutTimeout time.Duration
}

// withoutJitter is a Schedule drawing every random fraction as 0.
type withoutJitter struct{ s retry.Schedule }

// WithoutJitter returns s with its random draws fixed at zero: Exponential
// waits exactly 1, 2, 4 … units, the clients of a thundering herd retrying in
// lockstep.
func WithoutJitter(s retry.Schedule) retry.Schedule { return withoutJitter{s} }

func (w withoutJitter) Delay(n int, prev time.Duration, _ retry.Rand) time.Duration {
	return w.s.Delay(n, prev, zeroRand{})
}

type zeroRand struct{}

func (zeroRand) Float64() float64 { return 0 }

// withDefaults returns s with every zero field set to its default.
func (s Scenario) withDefaults() Scenario {
	if s.Duration == 0 {
		s.Duration = DefaultDuration
	}
	if s.Duration > 0 && s.Duration <= MaxDuration {
		s.Duration = (s.Duration + time.Second - 1).Truncate(time.Second)
	}
	if s.Target.Service == "" {
		s.Target.Service = DefaultService
	}
	if s.Target.Account == "" {
		s.Target.Account = DefaultAccount
	}
	if s.Target.Region == "" {
		s.Target.Region = DefaultRegion
	}
	if s.Target.Action == "" {
		s.Target.Action = DefaultAction
	}
	if s.Quota == nil {
		s.Quota = quota.Default()
	}
	if len(s.Clients) == 0 {
		s.Clients = []Clients{{Name: "clients", Rate: DefaultRate}}
	} else {
		s.Clients = append([]Clients(nil), s.Clients...)
	}
	for i := range s.Clients {
		c := &s.Clients[i]
		if c.Name == "" {
			c.Name = fmt.Sprintf("clients-%d", i+1)
		}
		if c.Process == "" {
			c.Process = Constant
		}
		if c.Action == "" {
			c.Action = s.Target.Action
		}
	}
	if s.Retry.Schedule == nil {
		s.Retry.Schedule = retry.DefaultSchedule()
	}
	if s.Retry.Deadline == 0 {
		s.Retry.Deadline = retry.DefaultDeadline
	}
	if s.Retry.Budget.Kind == RatioBudget {
		if s.Retry.Budget.Ratio == 0 {
			s.Retry.Budget.Ratio = retry.DefaultRetryRatio
		}
		if s.Retry.Budget.Burst == 0 {
			s.Retry.Budget.Burst = 10
		}
	}
	b := &s.Backend
	if b.ServiceTime == 0 {
		b.ServiceTime = DefaultServiceTime
	}
	if b.Distribution == "" {
		b.Distribution = Exponential
	}
	if b.CPUPerRequest == 0 {
		b.CPUPerRequest = DefaultCPUPerRequest
	}
	if b.ColdStart == 0 {
		b.ColdStart = DefaultColdStart
	}
	if b.Policy == "" {
		b.Policy = CloudRun
	}
	if b.Service == "" {
		b.Service = DefaultServiceName
	}
	if b.RequestTimeout == 0 {
		b.RequestTimeout = DefaultRequestTimeout
	}
	if b.RolloutTimeout == 0 {
		b.RolloutTimeout = DefaultRolloutTimeout
	}
	b.Autoscale.Policy = nil
	return s
}

// expectedCalls integrates the clients' rates over the duration and adds
// their bursts: the number of first attempts of a run, on average.
func (s Scenario) expectedCalls() float64 {
	end := s.Duration.Seconds()
	var n float64
	for _, c := range s.Clients {
		if c.BurstAt <= s.Duration {
			n += float64(c.Burst)
		}
		from, rate := 0.0, c.Rate
		for _, st := range c.Steps {
			at := min(st.At.Seconds(), end)
			n += rate * max(at-from, 0)
			from, rate = max(from, at), st.Rate
		}
		n += rate * max(end-from, 0)
	}
	return n
}

// policy builds the scenario's autoscaling policy for cfg.
func (b Backend) policy(cfg autoscale.Config) autoscale.Policy {
	switch b.Policy {
	case KPA:
		return autoscale.NewKnativeKPA(cfg)
	case HPA:
		return autoscale.NewKubernetesHPA(cfg)
	default:
		return autoscale.NewCloudRun(cfg)
	}
}

// budget builds a new retry budget of kind b, or nil for NoBudget.
func (b Budget) budget() *retry.Budget {
	switch b.Kind {
	case TokenBudget:
		return retry.DefaultTokenBudget()
	case RatioBudget:
		return retry.NewRatioBudget(b.Ratio, b.Burst)
	}
	return nil
}
