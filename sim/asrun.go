package sim

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tollgate/tollgate/retry"
)

// WriteScenario writes the scenario r ran as a scenario file that
// ParseStudy reads back: every field with its default applied (the
// schedule's base and max, the autoscaler's targets and bounds, the
// bucket's limit), so that `tollgate sim --scenario` on the output runs the
// same run again, seed included. A retry.Schedule of the Go API that a
// file cannot name is written as a comment and left to its default. A quota.Config of the Go API is not written either: the file
// gives the target category's limit, and other categories take quota's
// built-in limits. With Scenario.Increases the file gives them instead of
// the limit, and the QuotaPolicy's rule for every service, the one rule a
// file can hold; rules for one service or category are not written.
func WriteScenario(w io.Writer, r *Result) error {
	doc := scenarioNode(r)
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("sim: write scenario: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("sim: write scenario: %w", err)
	}
	return nil
}

// ymap is a YAML mapping under construction.
type ymap struct{ n *yaml.Node }

func newMap() ymap { return ymap{&yaml.Node{Kind: yaml.MappingNode}} }

func (m ymap) flow() ymap { m.n.Style = yaml.FlowStyle; return m }

// add sets key to v: a string, a number, a bool, a duration, a node or a
// ymap. comment, when given, goes at the end of the key's line.
func (m ymap) add(key string, v any, comment ...string) {
	k := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}
	var val *yaml.Node
	switch v := v.(type) {
	case ymap:
		val = v.n
	case *yaml.Node:
		val = v
	case string:
		val = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
	case time.Duration:
		val = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v.String()}
	case bool:
		val = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v)}
	case int:
		val = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(v)}
	case int64:
		val = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(v, 10)}
	case uint64:
		val = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatUint(v, 10)}
	case float64:
		val = &yaml.Node{Kind: yaml.ScalarNode, Value: formatFloat(v)} // untagged: "20" must not read "!!float 20"
	default:
		panic(fmt.Sprintf("sim: no YAML for %T", v))
	}
	if len(comment) > 0 {
		if val.Kind == yaml.ScalarNode || val.Style == yaml.FlowStyle {
			val.LineComment = comment[0]
		} else {
			k.LineComment = comment[0]
		}
	}
	m.n.Content = append(m.n.Content, k, val)
}

// formatFloat writes v so that it parses back to the same float64.
func formatFloat(v float64) string {
	if a := math.Abs(v); a == 0 || (a >= 1e-4 && a < 1e15) {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func scenarioNode(r *Result) *yaml.Node {
	sc := r.Scenario
	top := newMap()
	top.n.HeadComment = "The scenario as run, every default written out: run it again with\n" +
		"tollgate sim --scenario FILE"
	top.add("name", sc.Name)
	top.add("duration", sc.Duration)
	top.add("seed", sc.Seed, "equal seeds give equal runs")

	t := newMap()
	t.add("service", sc.Target.Service)
	t.add("account", sc.Target.Account)
	t.add("region", sc.Target.Region)
	t.add("action", sc.Target.Action)
	top.add("target", t)

	if len(sc.Increases) > 0 {
		top.add("increases", increasesNode(sc.Increases), "Service Quotas requests on the target's category")
		if pol := policyNode(sc); pol.n != nil {
			top.add("quota_policy", pol)
		}
	} else if !r.Limit.IsZero() {
		l := newMap()
		l.add("capacity", r.Limit.Capacity())
		l.add("refill_per_second", r.Limit.RefillPerSecond())
		top.add("limit", l, "the target category's bucket")
	}

	clients := &yaml.Node{Kind: yaml.SequenceNode}
	for _, c := range sc.Clients {
		g := newMap()
		g.add("name", c.Name)
		g.add("process", string(c.Process))
		g.add("rate", c.Rate, "calls per second")
		if len(c.Steps) > 0 {
			steps := &yaml.Node{Kind: yaml.SequenceNode}
			for _, st := range c.Steps {
				s := newMap().flow()
				s.add("at", st.At)
				s.add("rate", st.Rate)
				steps.Content = append(steps.Content, s.n)
			}
			g.add("steps", steps)
		}
		if c.Burst > 0 {
			g.add("burst", c.Burst)
			g.add("burst_at", c.BurstAt)
		}
		g.add("action", c.Action)
		addRunTask(g, c)
		clients.Content = append(clients.Content, g.n)
	}
	top.add("clients", clients)
	top.add("retry", retryNode(sc.Retry))
	top.add("backend", backendNode(sc.Backend))
	return &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{top.n}}
}

func increasesNode(ins []Increase) *yaml.Node {
	seq := &yaml.Node{Kind: yaml.SequenceNode}
	for _, in := range ins {
		m := newMap().flow()
		m.add("at", in.At)
		if in.Burst > 0 {
			m.add("burst", in.Burst)
		}
		if in.Rate > 0 {
			m.add("rate", in.Rate)
		}
		if in.ApproveAt > 0 {
			m.add("approve_at", in.ApproveAt)
		}
		seq.Content = append(seq.Content, m.n)
	}
	return seq
}

// policyNode writes the scenario's quota policy when a file can say it:
// one rule for every service. Other rules of the Go API are left out,
// and the file's requests then wait for their approve_at.
func policyNode(sc Scenario) ymap {
	for _, rule := range sc.QuotaPolicy.Rules {
		if rule.Service == "" && rule.Category == "" {
			m := newMap()
			m.add("auto_approve_factor", rule.AutoApproveFactor)
			m.add("auto_approve_up_to", rule.Burst.AutoApproveUpTo)
			m.add("max", rule.Burst.Max)
			return m
		}
	}
	return ymap{}
}

func retryNode(rt Retry) ymap {
	m := newMap()
	if rt.Disabled {
		m.add("schedule", "none", "every call is one attempt")
		return m
	}
	s, jitter := rt.Schedule, true
	if wj, ok := s.(withoutJitter); ok {
		s, jitter = wj.s, false
	}
	var (
		name          string
		base, maxWait time.Duration
	)
	orDefault := func(d, def time.Duration) time.Duration {
		if d <= 0 {
			return def
		}
		return d
	}
	switch s := s.(type) {
	case nil:
		name, base, maxWait = "exponential", retry.DefaultUnit, retry.DefaultMaxBackoff
	case retry.Exponential:
		name, base, maxWait = "exponential", orDefault(s.Unit, retry.DefaultUnit), orDefault(s.Max, retry.DefaultMaxBackoff)
	case retry.FullJitter:
		name, base, maxWait = "full-jitter", orDefault(s.Base, time.Second), orDefault(s.Cap, retry.DefaultMaxBackoff)
	case retry.EqualJitter:
		name, base, maxWait = "equal-jitter", orDefault(s.Base, time.Second), orDefault(s.Cap, retry.DefaultMaxBackoff)
	case retry.DecorrelatedJitter:
		name, base, maxWait = "decorrelated-jitter", orDefault(s.Base, time.Second), orDefault(s.Cap, retry.DefaultMaxBackoff)
	case retry.Constant:
		name, base = "constant", max(time.Duration(s), 0)
	}
	if name == "" {
		m.n.HeadComment = fmt.Sprintf("the run's schedule, a %T of the Go API, cannot be written in a file", s)
	} else {
		m.add("schedule", name)
		m.add("jitter", jitter)
		m.add("base", base)
		if name != "constant" {
			m.add("max", maxWait, "maximum_backoff")
		}
	}
	m.add("max_attempts", rt.MaxAttempts, map[bool]string{true: "no cap but the deadline", false: "the first attempt included"}[rt.MaxAttempts == 0])
	if rt.Deadline < 0 {
		m.add("deadline", rt.Deadline, "negative: none")
	} else {
		m.add("deadline", rt.Deadline)
	}
	m.add("no_429", rt.No429)
	m.add("use_retry_after", rt.UseRetryAfter)
	b := newMap().flow()
	switch rt.Budget.Kind {
	case NoBudget:
		b.add("kind", "none")
	case RatioBudget:
		b.add("kind", string(rt.Budget.Kind))
		b.add("ratio", rt.Budget.Ratio)
		b.add("burst", rt.Budget.Burst)
	default:
		b.add("kind", string(rt.Budget.Kind))
	}
	m.add("budget", b)
	return m
}

func backendNode(b Backend) ymap {
	m := newMap()
	if b.None {
		m.add("none", true, "admitted calls succeed at once")
		return m
	}
	a := b.Autoscale.WithDefaults()
	m.add("policy", string(b.Policy))
	m.add("service_time", b.ServiceTime, "mean time a request runs")
	m.add("distribution", string(b.Distribution))
	m.add("cpu_per_request", b.CPUPerRequest, "cores")
	m.add("cold_start", b.ColdStart)
	m.add("min_instances", a.MinInstances)
	m.add("max_instances", a.MaxInstances)
	m.add("max_concurrency", a.MaxConcurrency)
	m.add("cpu_target", a.CPUTarget)
	m.add("concurrency_target", a.ConcurrencyTarget)
	m.add("cpus_per_instance", a.CPUsPerInstance)
	m.add("initial_cold_start", a.InitialColdStart)
	m.add("idle_timeout", a.IdleTimeout)
	m.add("literal_surplus_stop", a.LiteralSurplusStop)
	addRevisions(m, b)
	return m
}
