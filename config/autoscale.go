package config

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tollgate/tollgate/autoscale"
)

// The defaults of the autoscale settings that the runtime applies (package
// pool and pool/process; cmd/tollgate's tests check they agree), for
// WriteTable to print the effective values.
const (
	DefaultRequestTimeout   = 300 * time.Second
	DefaultMaxPending       = 1000
	DefaultReadinessTimeout = 240 * time.Second
	DefaultStopGrace        = 10 * time.Second
	DefaultRolloutTimeout   = 5 * time.Minute
)

// Autoscale is how a service's instances are run and scaled (SPEC §3): the
// process contract of a Cloud Run container, run on this machine.
type Autoscale struct {
	// Command is the program and its first arguments; Command[0] is
	// looked up on PATH unless it holds a slash, when it is relative to
	// WorkingDir.
	Command []string
	// Args follow Command.
	Args []string
	// Env is added to tollgate's environment, after it; PORT, K_SERVICE,
	// K_REVISION and K_CONFIGURATION are set by tollgate.
	Env []EnvVar
	// WorkingDir is the instances' directory, absolute: the config
	// file's directory unless working_dir says otherwise (relative to it).
	WorkingDir string
	// Readiness is how an instance is found ready.
	Readiness Readiness
	// Liveness, when set, probes every ready instance and replaces one
	// that fails it (liveness); nil: no check after readiness. Not with
	// Kubernetes, whose pod spec has its own livenessProbe.
	Liveness *Liveness
	// Kubernetes, when set instead of Command, runs the instances as the
	// pods of a Deployment (package pool/kube); Command, Args, Env and
	// WorkingDir are then unset, and Readiness.Timeout bounds the wait
	// for a pod.
	Kubernetes *Kubernetes
	// Engine holds the targets and bounds.
	Engine autoscale.Config
	// StopGrace is the time between SIGTERM and SIGKILL when an instance
	// stops; 0 means the runner's default (10 s, as Cloud Run).
	StopGrace time.Duration
	// RequestTimeout bounds a proxied request, its pending wait included
	// (request_timeout); 0 means the pool's default (300 s, as Cloud Run).
	RequestTimeout time.Duration
	// MaxPending bounds the requests waiting for an instance
	// (max_pending); 0 means the pool's default (1,000).
	MaxPending int
	// RolloutTimeout bounds how long a revision whose share grows (a new
	// command, or a traffic change) may take to get its instances ready
	// (rollout_timeout, 1s to 1h); with none ready by then the traffic
	// stays where it was, as on Cloud Run. 0 means the pool's default
	// (5 min).
	RolloutTimeout time.Duration
	// Memory limits each instance's memory in bytes (memory: 512Mi);
	// 0 means no limit. With Engine.CPUsPerInstance set (cpus), both are
	// enforced through a cgroup v2 per instance where tollgate can.
	Memory int64
	// CloudMap, when set, lists the ready instances in tollgate's Cloud
	// Map registry.
	CloudMap *CloudMap
	// Traffic, when set, splits the service's requests over its running
	// revisions by percent and gives revisions tags (traffic); unset, the
	// latest ready revision takes them all. With Kubernetes each revision
	// is the Deployment its template named, scaled on its own.
	Traffic []TrafficTarget
	// Sticky, when set, splits by client rather than per request
	// (sticky); nil: per request.
	Sticky *Sticky
}

// EnvVar is one environment variable of an instance.
type EnvVar struct {
	Name, Value string
}

// Readiness is an instance's readiness check.
type Readiness struct {
	// Path is an HTTP path that must answer 2xx to a GET; empty means a
	// TCP connect to the port is enough.
	Path string
	// Timeout bounds the wait for readiness from the start; 0 means the
	// runner's default.
	Timeout time.Duration
}

// Template describes what runs and how it is stopped, in a stable text
// form: two Autoscale values with equal Templates run the same thing, so a
// reload that keeps it keeps the instances, and one that changes it makes
// a new revision (as a changed container or timeout does on Cloud Run).
// Targets and bounds are not part of it.
func (a *Autoscale) Template() string {
	var b strings.Builder
	if k := a.Kubernetes; k != nil {
		// The readiness timeout is left out: one runner serves a
		// Deployment for tollgate's life, so it applies from the start.
		fmt.Fprintf(&b, "kubernetes=%q/%q service=%q port=%d", k.Namespace, k.Deployment, k.Service, k.Port)
		b.WriteString(a.CloudMap.template())
		return b.String()
	}
	fmt.Fprintf(&b, "command=%q args=%q dir=%q ready=%q/%v grace=%v", a.Command, a.Args, a.WorkingDir, a.Readiness.Path, a.Readiness.Timeout, a.StopGrace)
	if a.Engine.CPUsPerInstance != 0 || a.Memory != 0 { // the runner's limits
		fmt.Fprintf(&b, " cpus=%g memory=%d", a.Engine.CPUsPerInstance, a.Memory)
	}
	for _, e := range a.Env {
		fmt.Fprintf(&b, " env %q=%q", e.Name, e.Value)
	}
	b.WriteString(a.Liveness.template())
	b.WriteString(a.CloudMap.template())
	return b.String()
}

var (
	envName  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	hostName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$`)
	// reservedEnv are set by tollgate for every instance, as Cloud Run
	// sets them.
	reservedEnv = []string{"PORT", "K_SERVICE", "K_REVISION", "K_CONFIGURATION"}
	// reservedPaths are tollgate's own endpoints, which a route may not
	// shadow.
	reservedPaths = []string{"/v1", "/healthz", "/readyz", "/metrics"}
)

func (p *parser) duration(n *yaml.Node, field string, lo, hi time.Duration) (time.Duration, bool) {
	s, ok := p.str(n, field)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < lo || d > hi {
		p.errorf(n, field, "%q is not a duration in [%v, %v] such as 30s", s, lo, hi)
		return 0, false
	}
	return d, true
}

func (p *parser) strings(n *yaml.Node, field string) ([]string, bool) {
	items := p.list(n, field)
	if n.Kind != yaml.SequenceNode {
		return nil, false
	}
	out := make([]string, 0, len(items))
	ok := true
	for i, it := range items {
		s, good := p.str(it, fmt.Sprintf("%s[%d]", field, i))
		ok = ok && good
		out = append(out, s)
	}
	return out, ok
}

func (p *parser) autoscale(n *yaml.Node, path string) (*Autoscale, bool) {
	a := &Autoscale{}
	ok := true
	var commandNode, dirNode, minNode, kubeNode, gpuNode, idleNode, livenessNode *yaml.Node
	cfg := &a.Engine
	num := func(dst *float64, lo, hi float64, loOpen bool) func(k, v *yaml.Node, f string) {
		return func(_, v *yaml.Node, f string) {
			x, good := p.number(v, f)
			if good && (x > hi || x < lo || (loOpen && x == lo)) {
				left := "["
				if loOpen {
					left = "("
				}
				p.errorf(v, f, "%v not in %s%v, %v]", x, left, lo, hi)
				good = false
			}
			if !good {
				ok = false
				return
			}
			*dst = x
		}
	}
	whole := func(dst *int, lo, hi int64) func(k, v *yaml.Node, f string) {
		return func(_, v *yaml.Node, f string) {
			x, good := p.integer(v, f)
			if good && (x < lo || x > hi) {
				p.errorf(v, f, "%d not in [%d, %d]", x, lo, hi)
				good = false
			}
			if !good {
				ok = false
				return
			}
			*dst = int(x)
		}
	}
	p.fields(n, path, map[string]func(k, v *yaml.Node, f string){
		"command": func(_, v *yaml.Node, f string) {
			commandNode = v
			if v.Kind == yaml.ScalarNode && v.Tag != "!!null" {
				a.Command = []string{v.Value} // one word: the program alone
				return
			}
			cmd, good := p.strings(v, f)
			if good && (len(cmd) == 0 || cmd[0] == "") {
				p.errorf(v, f, "empty: give the program to run, e.g. [./hello]")
				good = false
			}
			ok = ok && good
			a.Command = cmd
		},
		"traffic": func(_, v *yaml.Node, f string) {
			t, good := p.traffic(v, f)
			ok = ok && good
			a.Traffic = t
		},
		"sticky": func(_, v *yaml.Node, f string) {
			st, good := p.sticky(v, f)
			ok = ok && good
			a.Sticky = st
		},
		"kubernetes": func(_, v *yaml.Node, f string) {
			kubeNode = v
			k, good := p.kubernetes(v, f)
			ok = ok && good
			a.Kubernetes = k
		},
		"args": func(_, v *yaml.Node, f string) {
			args, good := p.strings(v, f)
			ok = ok && good
			a.Args = args
		},
		"env": func(_, v *yaml.Node, f string) { ok = p.env(v, f, a) && ok },
		"working_dir": func(_, v *yaml.Node, f string) {
			dirNode = v
			s, good := p.str(v, f)
			ok = ok && good
			a.WorkingDir = s
		},
		"readiness": func(_, v *yaml.Node, f string) {
			p.fields(v, f, map[string]func(k, v *yaml.Node, f string){
				"path": func(_, v *yaml.Node, f string) {
					s, good := p.probePath(v, f)
					ok = ok && good
					a.Readiness.Path = s
				},
				"timeout": func(_, v *yaml.Node, f string) {
					d, good := p.duration(v, f, time.Millisecond, time.Hour)
					ok = ok && good
					a.Readiness.Timeout = d
				},
			})
		},
		"liveness": func(_, v *yaml.Node, f string) {
			livenessNode = v
			l, good := p.liveness(v, f)
			ok = ok && good
			a.Liveness = l
		},
		"max_concurrency":    whole(&cfg.MaxConcurrency, 1, 1000),
		"cpus":               num(&cfg.CPUsPerInstance, 0, 1000, true),
		"cpu_target":         num(&cfg.CPUTarget, 0, 1, true),
		"concurrency_target": num(&cfg.ConcurrencyTarget, 0, 1, true),
		"min_instances": func(k, v *yaml.Node, f string) {
			minNode = v
			whole(&cfg.MinInstances, 0, autoscale.MaxInstancesLimit)(k, v, f)
		},
		"max_instances": whole(&cfg.MaxInstances, 1, autoscale.MaxInstancesLimit),
		"gpu": func(k, v *yaml.Node, f string) {
			gpuNode = v
			whole(&cfg.GPUs, 0, autoscale.MaxGPUs)(k, v, f)
		},
		"idle_timeout": func(_, v *yaml.Node, f string) {
			idleNode = v
			d, good := p.duration(v, f, autoscale.MinIdleTimeout, autoscale.MaxIdleTimeout)
			ok = ok && good
			cfg.IdleTimeout = d
		},
		"initial_cold_start": func(_, v *yaml.Node, f string) {
			d, good := p.duration(v, f, 0, time.Hour)
			ok = ok && good
			cfg.InitialColdStart = d
		},
		"cloud_map": func(_, v *yaml.Node, f string) {
			p.cloudMaps = append(p.cloudMaps, located{v, f})
			c, good := p.cloudMap(v, f)
			ok = ok && good
			a.CloudMap = c
		},
		"request_timeout": func(_, v *yaml.Node, f string) {
			d, good := p.duration(v, f, time.Second, time.Hour)
			ok = ok && good
			a.RequestTimeout = d
		},
		"max_pending": whole(&a.MaxPending, 1, 1_000_000),
		"rollout_timeout": func(_, v *yaml.Node, f string) {
			d, good := p.duration(v, f, time.Second, time.Hour)
			ok = ok && good
			a.RolloutTimeout = d
		},
		"memory": func(_, v *yaml.Node, f string) {
			str, good := p.str(v, f)
			if good {
				var err error
				if a.Memory, err = ParseBytes(str); err != nil {
					p.errorf(v, f, "%v", err)
					good = false
				}
			}
			ok = ok && good
		},
		"termination_grace_period": func(_, v *yaml.Node, f string) {
			d, good := p.duration(v, f, time.Millisecond, time.Hour)
			ok = ok && good
			a.StopGrace = d
		},
	})
	if n.Kind != yaml.MappingNode {
		return nil, false
	}
	switch {
	case kubeNode != nil && commandNode != nil:
		p.errorf(kubeNode, joinField(path, "kubernetes"), "give either command (local processes) or kubernetes (a Deployment's pods), not both")
		ok = false
	case kubeNode != nil:
		for _, c := range []struct {
			field string
			set   bool
		}{{"args", a.Args != nil}, {"env", a.Env != nil}, {"working_dir", dirNode != nil}, {"readiness.path", a.Readiness.Path != ""}, {"liveness", livenessNode != nil}} {
			if field := c.field; c.set {
				p.errorf(kubeNode, joinField(path, field), "not used with kubernetes: the pod spec says what runs and how it is probed")
				ok = false
			}
		}
	case commandNode == nil:
		p.errorf(n, joinField(path, "command"), "missing: the program to run, started with PORT set (or kubernetes: a Deployment)")
		ok = false
	}
	maxInst := cfg.MaxInstances
	if maxInst == 0 {
		maxInst = autoscale.DefaultMaxInstances
	}
	if ok && cfg.MinInstances > maxInst {
		p.errorf(minNode, joinField(path, "min_instances"), "%d is more than max_instances %d", cfg.MinInstances, maxInst)
		ok = false
	}
	if ok && cfg.GPUs > 0 && cfg.IdleTimeout > autoscale.DefaultGPUIdleTimeout {
		p.errorf(idleNode, joinField(path, "idle_timeout"), "%v is over %v: with gpu (line %d), instances are kept idle 10 minutes at most, as Cloud Run keeps GPU instances", cfg.IdleTimeout, autoscale.DefaultGPUIdleTimeout, gpuNode.Line)
		ok = false
	}
	if !ok {
		return nil, false
	}
	if a.Kubernetes != nil {
		if err := cfg.Validate(); err != nil {
			p.errorf(n, path, "%v", err)
			return nil, false
		}
		return a, true
	}
	// The working directory is relative to the config file's.
	base, err := filepath.Abs(filepath.Dir(p.file))
	if err != nil {
		base = filepath.Dir(p.file)
	}
	dir := a.WorkingDir
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(base, dir)
	}
	a.WorkingDir = dir
	if dirNode == nil {
		dirNode = n
	}
	if fi, err := statDir(dir); err != nil || !fi {
		p.errorf(dirNode, joinField(path, "working_dir"), "%s is not a directory", dir)
		return nil, false
	}
	prog := a.Command[0]
	if strings.Contains(prog, "/") && !filepath.IsAbs(prog) {
		prog = filepath.Join(dir, prog)
	}
	if _, err := exec.LookPath(prog); err != nil {
		p.errorf(commandNode, joinField(path, "command"), "%q cannot be run: %v", a.Command[0], err)
		return nil, false
	}
	if err := cfg.Validate(); err != nil { // every bound was checked above; a safety net
		p.errorf(n, path, "%v", err)
		return nil, false
	}
	return a, true
}

func statDir(dir string) (bool, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return false, err
	}
	return fi.IsDir(), nil
}

// env reads environment variables as a mapping (NAME: value) or as a
// Kubernetes-style list of {name, value}.
func (p *parser) env(n *yaml.Node, path string, a *Autoscale) bool {
	ok := true
	seen := map[string]bool{}
	add := func(k, v *yaml.Node, f, name, value string) {
		switch {
		case !envName.MatchString(name):
			p.errorf(k, f, "%q is not an environment variable name", name)
			ok = false
		case slices.Contains(reservedEnv, name):
			p.errorf(k, f, "%s is set by tollgate for every instance (%s)", name, strings.Join(reservedEnv, ", "))
			ok = false
		case seen[name]:
			p.errorf(k, f, "given twice")
			ok = false
		default:
			seen[name] = true
			a.Env = append(a.Env, EnvVar{Name: name, Value: value})
		}
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			f := joinField(path, k.Value)
			val, good := p.str(v, f)
			if !good {
				ok = false
				continue
			}
			add(k, v, f, k.Value, val)
		}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			f := fmt.Sprintf("%s[%d]", path, i)
			var name, value string
			var nameNode *yaml.Node
			p.fields(item, f, map[string]func(k, v *yaml.Node, f string){
				"name": func(_, v *yaml.Node, f string) {
					nameNode = v
					s, good := p.str(v, f)
					ok = ok && good
					name = s
				},
				"value": func(_, v *yaml.Node, f string) {
					s, good := p.str(v, f)
					ok = ok && good
					value = s
				},
			})
			if item.Kind != yaml.MappingNode {
				ok = false
				continue
			}
			if nameNode == nil {
				p.errorf(item, joinField(f, "name"), "missing")
				ok = false
				continue
			}
			add(nameNode, item, joinField(f, "name"), name, value)
		}
	default:
		p.errorf(n, path, "want a mapping of NAME: value or a list of {name, value}, got %s", kindName(n))
		ok = false
	}
	return ok
}
