package config

import (
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Liveness is an autoscaled service's liveness check (liveness:), as
// Cloud Run's HTTP liveness probe: once an instance is ready, a GET of
// Path on its own port every Period, answered 200–399 within Timeout;
// FailureThreshold failures in a row make it unhealthy, and the pool
// replaces it (package pool). Unset, instances are not probed after
// readiness.
type Liveness struct {
	// Path is the HTTP path probed, such as /healthz; required.
	Path string
	// Period is the time between probes; DefaultLivenessPeriod when
	// not given.
	Period time.Duration
	// Timeout bounds one probe, at most Period; DefaultLivenessTimeout
	// when not given.
	Timeout time.Duration
	// FailureThreshold is how many failed probes in a row make the
	// instance unhealthy; DefaultLivenessFailureThreshold when not given.
	FailureThreshold int
	// InitialDelay is added before the first probe, which comes one
	// Period after the instance is ready.
	InitialDelay time.Duration
}

// Cloud Run's defaults and bounds for an HTTP liveness probe (the
// Kubernetes probe's defaults too): a probe every 10 s with a 1 s
// timeout, unhealthy after 3 failures in a row; period and timeout 1 s to
// 1 h, the initial delay 0 to 240 s.
const (
	DefaultLivenessPeriod           = 10 * time.Second
	DefaultLivenessTimeout          = time.Second
	DefaultLivenessFailureThreshold = 3
	MaxLivenessPeriod               = time.Hour
	MaxLivenessInitialDelay         = 240 * time.Second
	MaxLivenessFailureThreshold     = 1000
	maxProbePath                    = 1024
)

// MaxOverMaxGrace is the pool's bound on an unhealthy instance finishing
// its requests beside its replacement (pool.MaxOverMaxGrace), for
// WriteTable; cmd/tollgate's tests check they agree.
const MaxOverMaxGrace = 15 * time.Minute

// probePath checks an HTTP path for a probe (readiness or liveness).
func (p *parser) probePath(v *yaml.Node, f string) (string, bool) {
	s, ok := p.str(v, f)
	if ok && (!strings.HasPrefix(s, "/") || strings.ContainsAny(s, " \t\r\n#") || len(s) > maxProbePath) {
		p.errorf(v, f, "%q is not an HTTP path such as /healthz (at most %d bytes)", s, maxProbePath)
		ok = false
	}
	return s, ok
}

// liveness reads a liveness block: path, period, timeout,
// failure_threshold and initial_delay, with Cloud Run's defaults.
func (p *parser) liveness(n *yaml.Node, path string) (*Liveness, bool) {
	l := &Liveness{}
	ok := true
	var pathNode, periodNode, timeoutNode *yaml.Node
	p.fields(n, path, map[string]func(k, v *yaml.Node, f string){
		"path": func(_, v *yaml.Node, f string) {
			pathNode = v
			s, good := p.probePath(v, f)
			ok = ok && good
			l.Path = s
		},
		"period": func(_, v *yaml.Node, f string) {
			periodNode = v
			d, good := p.duration(v, f, time.Second, MaxLivenessPeriod)
			ok = ok && good
			l.Period = d
		},
		"timeout": func(_, v *yaml.Node, f string) {
			timeoutNode = v
			d, good := p.duration(v, f, time.Second, MaxLivenessPeriod)
			ok = ok && good
			l.Timeout = d
		},
		"failure_threshold": func(_, v *yaml.Node, f string) {
			x, good := p.integer(v, f)
			if good && (x < 1 || x > MaxLivenessFailureThreshold) {
				p.errorf(v, f, "%d not in [1, %d]", x, MaxLivenessFailureThreshold)
				good = false
			}
			ok = ok && good
			l.FailureThreshold = int(x)
		},
		"initial_delay": func(_, v *yaml.Node, f string) {
			d, good := p.duration(v, f, 0, MaxLivenessInitialDelay)
			ok = ok && good
			l.InitialDelay = d
		},
	})
	if n.Kind != yaml.MappingNode {
		return nil, false
	}
	if pathNode == nil {
		p.errorf(n, joinField(path, "path"), "missing: the HTTP path to probe, such as /healthz")
		ok = false
	}
	if !ok {
		return nil, false
	}
	if l.Period == 0 {
		l.Period = DefaultLivenessPeriod
	}
	if l.Timeout == 0 {
		l.Timeout = DefaultLivenessTimeout
	}
	if l.FailureThreshold == 0 {
		l.FailureThreshold = DefaultLivenessFailureThreshold
	}
	// Only a given timeout can pass the period: the default (1 s) is the
	// shortest period.
	if l.Timeout > l.Period {
		what := fmt.Sprintf("the default period %v", l.Period)
		if periodNode != nil {
			what = fmt.Sprintf("period %v (line %d)", l.Period, periodNode.Line)
		}
		p.errorf(timeoutNode, joinField(path, "timeout"), "%v is more than %s: a probe must end before the next", l.Timeout, what)
		return nil, false
	}
	return l, true
}

// template is the liveness check in Autoscale.Template's form: a changed
// check makes a new revision, as on Cloud Run.
func (l *Liveness) template() string {
	if l == nil {
		return ""
	}
	return fmt.Sprintf(" liveness=%q/%v/%v/%d/%v", l.Path, l.Period, l.Timeout, l.FailureThreshold, l.InitialDelay)
}
