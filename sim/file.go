package sim

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/internal/yamlfield"
	"github.com/tollgate/tollgate/retry"
	"github.com/tollgate/tollgate/servicequotas"
)

// Study is a set of runs to compare, as a scenario file describes them.
type Study struct {
	// Name names the study (the file's name field).
	Name string
	// Description says what the study shows.
	Description string
	// Runs are the scenarios, one per run.
	Runs []Scenario
}

// Run runs every scenario of the study in order.
func (st *Study) Run() ([]*Result, error) {
	out := make([]*Result, 0, len(st.Runs))
	for _, sc := range st.Runs {
		res, err := Run(sc)
		if err != nil {
			return nil, fmt.Errorf("run %q: %w", sc.Name, err)
		}
		out = append(out, res)
	}
	return out, nil
}

// FileError is a problem at one place of a scenario file. Its message has
// the form of a config file error (config.FieldError), formatted by the
// same code: "file:line:column: field.path: message". Unlike
// config.FieldError it wraps an underlying error and matches
// ErrInvalidScenario, not config.ErrInvalidConfig.
type FileError struct {
	// File is the file name given to ParseStudy.
	File string
	// Line is the 1-based line, or 0 when unknown.
	Line int
	// Column is the 1-based column, or 0 when unknown.
	Column int
	// Field is the field's path as the file spells it, e.g.
	// "runs[1].backend.policy"; empty when the problem is not one field's.
	Field string
	// Msg says what is wrong.
	Msg string
	// Err is the underlying error, if any.
	Err error
}

// Error formats the error as "file:line:column: field: message", leaving
// out what is unknown.
func (e *FileError) Error() string {
	return yamlfield.Format(e.File, e.Line, e.Column, e.Field, e.Msg)
}

// Is reports whether target is ErrInvalidScenario.
func (e *FileError) Is(target error) bool { return target == ErrInvalidScenario }

// Unwrap returns the underlying error, if any.
func (e *FileError) Unwrap() error { return e.Err }

// MaxFileSize bounds the size of a scenario file.
const MaxFileSize = 1 << 20

// LoadStudy reads and parses the scenario file at path.
func LoadStudy(path string) (*Study, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	return ParseStudy(path, data)
}

type fileDoc struct {
	Description string `yaml:"description"`
	fileRun     `yaml:",inline"`
	Runs        []fileRun `yaml:"runs"`
}

type fileRun struct {
	Name     string        `yaml:"name"`
	Duration time.Duration `yaml:"duration"`
	Seed     *uint64       `yaml:"seed"`
	Target   *struct {
		Service string `yaml:"service"`
		Account string `yaml:"account"`
		Region  string `yaml:"region"`
		Action  string `yaml:"action"`
	} `yaml:"target"`
	Limit *struct {
		Capacity        int64   `yaml:"capacity"`
		RefillPerSecond float64 `yaml:"refill_per_second"`
	} `yaml:"limit"`
	Increases []struct {
		At        time.Duration `yaml:"at"`
		Burst     int64         `yaml:"burst"`
		Rate      float64       `yaml:"rate"`
		ApproveAt time.Duration `yaml:"approve_at"`
	} `yaml:"increases"`
	QuotaPolicy *struct {
		AutoApproveFactor float64 `yaml:"auto_approve_factor"`
		AutoApproveUpTo   float64 `yaml:"auto_approve_up_to"`
		Max               float64 `yaml:"max"`
	} `yaml:"quota_policy"`
	Clients []struct {
		Name    string  `yaml:"name"`
		Process string  `yaml:"process"`
		Rate    float64 `yaml:"rate"`
		Steps   []struct {
			At   time.Duration `yaml:"at"`
			Rate float64       `yaml:"rate"`
		} `yaml:"steps"`
		Burst            int           `yaml:"burst"`
		BurstAt          time.Duration `yaml:"burst_at"`
		Action           string        `yaml:"action"`
		Tag              string        `yaml:"tag"`
		StickyKey        string        `yaml:"sticky_key"`
		Count            int           `yaml:"count"`
		LaunchType       string        `yaml:"launch_type"`
		CapacityProvider string        `yaml:"capacity_provider"`
	} `yaml:"clients"`
	Retry   *fileRetry `yaml:"retry"`
	Backend *struct {
		None               bool                `yaml:"none"`
		ServiceTime        time.Duration       `yaml:"service_time"`
		Distribution       string              `yaml:"distribution"`
		CPUPerRequest      float64             `yaml:"cpu_per_request"`
		ColdStart          time.Duration       `yaml:"cold_start"`
		Policy             string              `yaml:"policy"`
		MinInstances       int                 `yaml:"min_instances"`
		MaxInstances       int                 `yaml:"max_instances"`
		MaxConcurrency     int                 `yaml:"max_concurrency"`
		CPUTarget          float64             `yaml:"cpu_target"`
		ConcurrencyTarget  float64             `yaml:"concurrency_target"`
		CPUsPerInstance    float64             `yaml:"cpus_per_instance"`
		InitialColdStart   time.Duration       `yaml:"initial_cold_start"`
		IdleTimeout        time.Duration       `yaml:"idle_timeout"`
		LiteralSurplusStop bool                `yaml:"literal_surplus_stop"`
		GPU                int                 `yaml:"gpu"`
		Service            string              `yaml:"service"`
		RequestTimeout     time.Duration       `yaml:"request_timeout"`
		RolloutTimeout     time.Duration       `yaml:"rollout_timeout"`
		Revisions          []fileRevision      `yaml:"revisions"`
		Traffic            []fileTraffic       `yaml:"traffic"`
		TrafficChanges     []fileTrafficChange `yaml:"traffic_changes"`
	} `yaml:"backend"`
}

type fileRetry struct {
	Schedule    string        `yaml:"schedule"`
	Jitter      *bool         `yaml:"jitter"`
	Base        time.Duration `yaml:"base"`
	Max         time.Duration `yaml:"max"`
	MaxAttempts int           `yaml:"max_attempts"`
	Deadline    time.Duration `yaml:"deadline"`
	Budget      *struct {
		Kind  string  `yaml:"kind"`
		Ratio float64 `yaml:"ratio"`
		Burst float64 `yaml:"burst"`
	} `yaml:"budget"`
	No429         bool `yaml:"no_429"`
	UseRetryAfter bool `yaml:"use_retry_after"`
}

// Schedule names accepted by a scenario file's retry.schedule.
var scheduleNames = []string{"exponential", "full-jitter", "equal-jitter", "decorrelated-jitter", "constant", "none"}

var (
	yamlLine   = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	yamlInType = regexp.MustCompile(` in type \S+`)
)

// ParseStudy parses a scenario file. file names it in errors. A file holds
// one scenario (the fields of Scenario in snake_case; durations as "1.5s")
// and, under runs, optional variants: each run starts from that scenario and
// replaces every top-level block it sets (duration, seed, target, limit,
// increases, quota_policy, clients, retry, backend). Unknown fields (listing the known ones), fields
// given twice, values of the wrong kind and scenarios that could not run
// are errors of the form "file:line:column: field.path: message"
// (*FileError; several are joined with errors.Join, one a line); every
// error wraps ErrInvalidScenario.
func ParseStudy(file string, data []byte) (*Study, error) {
	ferr := func(line int, msg string, err error) error {
		return &FileError{File: file, Line: line, Msg: msg, Err: err}
	}
	if len(data) > MaxFileSize {
		return nil, ferr(0, fmt.Sprintf("file larger than %d bytes", MaxFileSize), nil)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		se := yamlfield.SyntaxError(file, data, err)
		return nil, &FileError{File: file, Line: se.Line, Column: se.Column, Msg: se.Msg, Err: err}
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return nil, ferr(0, "empty scenario file", nil)
	}
	top := root.Content[0]
	if top.Kind != yaml.MappingNode {
		return nil, ferr(top.Line, "a scenario file is a mapping of fields", nil)
	}
	chk := checker{w: yamlfield.Walker{File: file}}
	chk.check(top, reflect.TypeFor[fileDoc](), nil, 0)
	if errs := chk.errs(); len(errs) == 1 {
		return nil, errs[0]
	} else if len(errs) > 1 {
		return nil, errors.Join(errs...)
	}
	var doc fileDoc
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return nil, yamlErrors(file, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, ferr(extra.Line, "a second YAML document: a scenario file holds one", nil)
	} else if !errors.Is(err, io.EOF) {
		return nil, yamlErrors(file, err)
	}

	st := &Study{Name: doc.Name, Description: doc.Description}
	variants := doc.Runs
	if len(variants) == 0 {
		variants = []fileRun{{}}
	}
	seen := map[string]bool{}
	for i, v := range variants {
		if len(doc.Runs) > 0 && v.Name != "" {
			if seen[v.Name] {
				path := []any{"runs", i, "name"}
				n := nodeNear(top, path)
				return nil, &FileError{File: file, Line: n.Line, Column: n.Column, Field: pathString(path), Msg: fmt.Sprintf("a second run named %q", v.Name)}
			}
			seen[v.Name] = true
		}
		run := doc.fileRun
		prefix := []any{}
		if len(doc.Runs) > 0 {
			prefix = []any{"runs", i}
		}
		// Where a field's block comes from: the variant when it sets the
		// block, else the base scenario.
		locate := func(path []any) []any {
			if len(doc.Runs) > 0 && len(path) > 0 {
				if n := nodeAt(top, append(append([]any{}, prefix...), path[0])); n != nil {
					return append(append([]any{}, prefix...), path...)
				}
			}
			return path
		}
		overlay(&run, v)
		if len(doc.Runs) > 0 {
			run.Name = v.Name
			if run.Name == "" {
				run.Name = fmt.Sprintf("run-%d", i+1)
			}
		}
		sc, err := run.scenario()
		if err == nil {
			err = sc.Validate()
		}
		if err != nil {
			path, msg := prefix, err.Error()
			var fe *FieldError
			if errors.As(err, &fe) {
				path, msg = locate(fe.Path), fe.Msg
			}
			n := nodeNear(top, path)
			return nil, &FileError{File: file, Line: n.Line, Column: n.Column, Field: pathString(path), Msg: msg, Err: err}
		}
		st.Runs = append(st.Runs, sc)
	}
	return st, nil
}

// overlay replaces the blocks of base that v sets.
func overlay(base *fileRun, v fileRun) {
	if v.Duration != 0 {
		base.Duration = v.Duration
	}
	if v.Seed != nil {
		base.Seed = v.Seed
	}
	if v.Target != nil {
		base.Target = v.Target
	}
	if v.Limit != nil {
		base.Limit = v.Limit
	}
	if v.Increases != nil {
		base.Increases = v.Increases
	}
	if v.QuotaPolicy != nil {
		base.QuotaPolicy = v.QuotaPolicy
	}
	if v.Clients != nil {
		base.Clients = v.Clients
	}
	if v.Retry != nil {
		base.Retry = v.Retry
	}
	if v.Backend != nil {
		base.Backend = v.Backend
	}
}

// yamlErrors turns a decoding error into FileErrors, one per line reported.
func yamlErrors(file string, err error) error {
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	var errs []error
	for _, m := range msgs {
		fe := &FileError{File: file, Msg: strings.TrimPrefix(m, "yaml: "), Err: err}
		if sub := yamlLine.FindStringSubmatch(m); sub != nil {
			fe.Line, _ = strconv.Atoi(sub[1])
			fe.Msg = sub[2]
		}
		fe.Msg = yamlInType.ReplaceAllString(fe.Msg, "")
		errs = append(errs, fe)
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

// nodeAt returns the node at path under n (mapping keys and sequence
// indexes), or nil.
func nodeAt(n *yaml.Node, path []any) *yaml.Node {
	for _, p := range path {
		var next *yaml.Node
		switch p := p.(type) {
		case string:
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value == p {
						next = n.Content[i+1]
					}
				}
			}
		case int:
			if n.Kind == yaml.SequenceNode && p >= 0 && p < len(n.Content) {
				next = n.Content[p]
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

// nodeNear returns the deepest node along path under n: the field's
// value, or the block it would be in when the file leaves it out.
func nodeNear(n *yaml.Node, path []any) *yaml.Node {
	for i := len(path); i >= 0; i-- {
		if m := nodeAt(n, path[:i]); m != nil {
			return m
		}
	}
	return n
}

// scenario converts a run of a file into a Scenario.
func (f fileRun) scenario() (Scenario, error) {
	sc := Scenario{Name: f.Name, Duration: f.Duration}
	if f.Duration < 0 {
		return sc, invalid([]any{"duration"}, "duration %v must be positive", f.Duration)
	}
	if f.Seed != nil {
		sc.Seed = *f.Seed
	}
	if t := f.Target; t != nil {
		sc.Target = Target{Service: t.Service, Account: t.Account, Region: t.Region, Action: t.Action}
	}
	if l := f.Limit; l != nil {
		lim, err := bucket.NewLimit(l.Capacity, l.RefillPerSecond)
		if err != nil {
			return sc, &FieldError{Path: []any{"limit"}, Msg: err.Error(), Err: err}
		}
		sc.Limit = lim
	}
	for _, in := range f.Increases {
		sc.Increases = append(sc.Increases, Increase{At: in.At, Burst: in.Burst, Rate: in.Rate, ApproveAt: in.ApproveAt})
	}
	if p := f.QuotaPolicy; p != nil {
		// The file's one rule bounds the burst and the rate alike: a
		// scenario's increases ask for one of them at a time.
		b := servicequotas.Bounds{AutoApproveUpTo: p.AutoApproveUpTo, Max: p.Max}
		sc.QuotaPolicy.Rules = []servicequotas.Rule{{AutoApproveFactor: p.AutoApproveFactor, Burst: b, Rate: b}}
	}
	for _, c := range f.Clients {
		cl := Clients{Name: c.Name, Process: Process(c.Process), Rate: c.Rate, Burst: c.Burst, BurstAt: c.BurstAt, Action: c.Action,
			Tag: c.Tag, StickyKey: c.StickyKey, Count: c.Count, LaunchType: c.LaunchType, CapacityProvider: c.CapacityProvider}
		for _, s := range c.Steps {
			cl.Steps = append(cl.Steps, Step{At: s.At, Rate: s.Rate})
		}
		sc.Clients = append(sc.Clients, cl)
	}
	if r := f.Retry; r != nil {
		rt, err := r.retry()
		if err != nil {
			return sc, err
		}
		sc.Retry = rt
	}
	if b := f.Backend; b != nil {
		sc.Backend = Backend{
			None:          b.None,
			ServiceTime:   b.ServiceTime,
			Distribution:  Distribution(b.Distribution),
			CPUPerRequest: b.CPUPerRequest,
			ColdStart:     b.ColdStart,
			Policy:        PolicyName(b.Policy),
			Autoscale: autoscale.Config{
				CPUTarget:          b.CPUTarget,
				ConcurrencyTarget:  b.ConcurrencyTarget,
				MaxConcurrency:     b.MaxConcurrency,
				CPUsPerInstance:    b.CPUsPerInstance,
				MinInstances:       b.MinInstances,
				MaxInstances:       b.MaxInstances,
				InitialColdStart:   b.InitialColdStart,
				IdleTimeout:        b.IdleTimeout,
				LiteralSurplusStop: b.LiteralSurplusStop,
				GPUs:               b.GPU,
			},
			Service:        b.Service,
			RequestTimeout: b.RequestTimeout,
			RolloutTimeout: b.RolloutTimeout,
			Revisions:      revisionsOf(b.Revisions),
			Traffic:        trafficOf(b.Traffic),
			TrafficChanges: changesOf(b.TrafficChanges),
		}
	}
	return sc, nil
}

func (r *fileRetry) retry() (Retry, error) {
	rt := Retry{MaxAttempts: r.MaxAttempts, Deadline: r.Deadline, No429: r.No429, UseRetryAfter: r.UseRetryAfter}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"base", r.Base}, {"max", r.Max}} {
		if d.v < 0 || d.v > time.Hour {
			return rt, invalid([]any{"retry", d.name}, "%s %v must be in [0, 1h]", d.name, d.v)
		}
	}
	switch r.Schedule {
	case "", "exponential":
		rt.Schedule = retry.Exponential{Unit: r.Base, Max: r.Max}
	case "full-jitter":
		rt.Schedule = retry.FullJitter{Base: r.Base, Cap: r.Max}
	case "equal-jitter":
		rt.Schedule = retry.EqualJitter{Base: r.Base, Cap: r.Max}
	case "decorrelated-jitter":
		rt.Schedule = retry.DecorrelatedJitter{Base: r.Base, Cap: r.Max}
	case "constant":
		base := r.Base
		if base == 0 {
			base = retry.DefaultUnit
		}
		rt.Schedule = retry.Constant(base)
	case "none":
		rt.Disabled = true
	default:
		return rt, invalid([]any{"retry", "schedule"}, "unknown schedule %q (want one of %s)", r.Schedule, strings.Join(scheduleNames, ", "))
	}
	if r.Jitter != nil && !*r.Jitter && rt.Schedule != nil {
		rt.Schedule = WithoutJitter(rt.Schedule)
	}
	if b := r.Budget; b != nil {
		rt.Budget = Budget{Kind: BudgetKind(b.Kind), Ratio: b.Ratio, Burst: b.Burst}
		if b.Kind == "" || b.Kind == "none" {
			rt.Budget.Kind = NoBudget
		}
	}
	return rt, nil
}
