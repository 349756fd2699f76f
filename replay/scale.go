package replay

// This file plays the requests of HTTP access logs through the autoscaled
// services of the config: recorded traffic as one more source of the
// simulator's arrivals (sim.Scaler), not a second simulator.

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/sim"
)

// ScaleService is an autoscaled service the requests are played through.
type ScaleService struct {
	// Name names it in the report and in ScaleOptions.Service.
	Name string
	// Route takes the requests it matches; nil takes none by route.
	Route *quota.Route
	// Backend is how its instances start and scale, as in a sim scenario.
	Backend sim.Backend
	// RequestTimeout cuts a request off once its pending wait and its
	// service time reach it; 0 for none.
	RequestTimeout time.Duration
}

// Sweep plays the requests once for each value of one autoscale setting.
type Sweep struct {
	// Setting is max_concurrency, min_instances or max_instances.
	Setting string
	// Values are the setting's values, one report column each.
	Values []int
}

// SweepSettings are the settings a Sweep can vary.
var SweepSettings = []string{"max_concurrency", "min_instances", "max_instances"}

// apply returns b with the setting at v.
func (s Sweep) apply(b sim.Backend, v int) (sim.Backend, error) {
	switch s.Setting {
	case "max_concurrency":
		b.Autoscale.MaxConcurrency = v
	case "min_instances":
		b.Autoscale.MinInstances = v
	case "max_instances":
		b.Autoscale.MaxInstances = v
	default:
		return b, fmt.Errorf("replay: cannot sweep %q (want max_concurrency, min_instances or max_instances)", s.Setting)
	}
	return b, nil
}

// ScaleOptions configure RunScale.
type ScaleOptions struct {
	// Services are the services, their routes tried in this order (most
	// specific first, as quota.Config.Routed gives them).
	Services []ScaleService
	// Service, when set, names the service every request goes to, routes
	// aside: for the log of a single service.
	Service string
	// Format is the logs' format; empty detects it per input.
	Format AccessFormat
	// LogFormat, when not nil, is the logs' layout as an nginx log_format
	// string says it.
	LogFormat *LogFormat
	// RequestTime is how long a request whose line has none ran (see
	// AccessOptions); the report warns of the requests it was assumed for.
	RequestTime time.Duration
	// TempDir is where requests are spilled to be sorted by time when
	// there are too many to sort in memory; os.TempDir() when empty.
	TempDir string
	// Sweep, when it has values, plays every service once per value.
	Sweep Sweep
	// Progress, when not nil, is called now and then with the bytes of
	// the inputs read and their total.
	Progress func(done, total int64)
	// OnSecond, when not nil, is called with every closed second of a
	// service's run (column: the index of the sweep's value, else 0).
	OnSecond func(service string, column int, s sim.Second)
}

// ScaleReport is what playing access logs through the autoscaler found.
type ScaleReport struct {
	// Inputs counts the inputs read, Formats them by format; Errors names
	// those that could not be read, or not to their end.
	Inputs  int              `json:"inputs"`
	Formats map[string]int64 `json:"formats"`
	Errors  []string         `json:"errors,omitempty"`
	// Requests counts the requests read; Skipped the lines skipped, the
	// first of which SkipSamples shows; Unrouted the requests no route
	// took, UnroutedSamples the first; OutOfSpan those more than
	// sim.MaxRecordedSpan after the first, not played.
	Requests        int64    `json:"requests"`
	Skipped         int64    `json:"skipped"`
	SkipSamples     []string `json:"skip_samples,omitempty"`
	Unrouted        int64    `json:"unrouted"`
	UnroutedSamples []string `json:"unrouted_samples,omitempty"`
	OutOfSpan       int64    `json:"out_of_span"`
	// Inexact says what could not be played exactly as the sorted log
	// would be; empty when the replay is exact.
	Inexact []string `json:"inexact,omitempty"`
	// Assumed counts the requests whose line had no request time, which
	// ran ScaleOptions.RequestTime; Warnings say so.
	Assumed  int64    `json:"assumed_request_time,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
	// Start is the start of the second of the first request played: the
	// runs' virtual time 0.
	Start time.Time `json:"start"`
	// Setting and Values are the sweep's; Values is empty without one.
	Setting string `json:"setting,omitempty"`
	Values  []int  `json:"values,omitempty"`
	// Services are the runs, one column per value of the sweep (one
	// without).
	Services []ServiceScale `json:"services"`
}

// ServiceScale is one service's runs.
type ServiceScale struct {
	// Name is the service's.
	Name string `json:"name"`
	// Columns are its runs' totals, by value of the sweep.
	Columns []sim.ScalerStats `json:"columns"`
	// PeakByMinute are its instances over time, by value of the sweep:
	// the most at the end of a second, minute by minute from Start.
	PeakByMinute [][]int `json:"peak_by_minute"`
	// Timeline is its runs over time, for the report's figure.
	Timeline *ScaleTimeline `json:"timeline"`
}

type scaleRun struct {
	opt     ScaleOptions
	scalers [][]*sim.Scaler // by service, by column
	series  []*minuteSeries // by service × columns + column
	sorted  *sorter
	origin  int64
	started bool
	total   int64
	done    int64
	rep     ScaleReport
	err     error
}

// RunScale plays the requests of access logs inputs through the services
// of opt, each on its own autoscaler, on a virtual clock. An input that
// cannot be read is named in ScaleReport.Errors and the others are still
// played; RunScale fails when opt is invalid.
func RunScale(inputs []Input, opt ScaleOptions) (*ScaleReport, error) {
	if len(opt.Services) == 0 {
		return nil, errors.New("replay: no autoscaled service to play the requests through")
	}
	if opt.Service != "" && !slices.ContainsFunc(opt.Services, func(s ScaleService) bool { return s.Name == opt.Service }) {
		return nil, fmt.Errorf("replay: no autoscaled service %q", opt.Service)
	}
	r := &scaleRun{opt: opt}
	r.rep.Formats = map[string]int64{}
	cols := max(len(opt.Sweep.Values), 1)
	if len(opt.Sweep.Values) > 0 {
		r.rep.Setting, r.rep.Values = opt.Sweep.Setting, opt.Sweep.Values
	}
	for _, s := range opt.Services {
		var row []*sim.Scaler
		for c := range cols {
			b := s.Backend
			if len(opt.Sweep.Values) > 0 {
				var err error
				if b, err = opt.Sweep.apply(b, opt.Sweep.Values[c]); err != nil {
					return nil, err
				}
			}
			ms := newMinuteSeries()
			r.series = append(r.series, ms)
			name, c := s.Name, c
			on := func(sec sim.Second) {
				ms.add(sec)
				if opt.OnSecond != nil {
					opt.OnSecond(name, c, sec)
				}
			}
			sc, err := sim.NewScaler(b, s.RequestTimeout, on)
			if err != nil {
				return nil, fmt.Errorf("replay: service %s: %w", s.Name, err)
			}
			row = append(row, sc)
		}
		r.scalers = append(r.scalers, row)
	}
	for _, in := range inputs {
		r.total += in.Size
	}
	r.sorted = newSorter(opt.TempDir)
	defer r.sorted.close()
	for _, in := range byName(inputs) {
		r.read(in)
	}
	if r.err != nil {
		return nil, r.err
	}
	// Requests of one instant: by service, then service time.
	tie := func(a, b sortEntry) int { return cmp.Or(cmp.Compare(a.v, b.v), cmp.Compare(a.x, b.x)) }
	inexact, err := r.sorted.drain(tie, r.play)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	if r.err != nil {
		return nil, r.err
	}
	if inexact > 0 {
		r.rep.Inexact = append(r.rep.Inexact, fmt.Sprintf("%d instants held more than %d requests each: they were played partly in the order the logs hold them", inexact, maxInMemory))
	}
	if r.rep.Assumed > 0 {
		r.rep.Warnings = append(r.rep.Warnings, fmt.Sprintf("%d of %d requests had no request time in the log: each was assumed to run %v (--request-time), arriving that long before its logged time", r.rep.Assumed, r.rep.Requests, opt.RequestTime))
	}
	for i, s := range opt.Services {
		ss := ServiceScale{Name: s.Name}
		runs := r.series[i*cols : (i+1)*cols]
		for c, sc := range r.scalers[i] {
			st, err := sc.Finish()
			if err != nil {
				return nil, fmt.Errorf("replay: service %s: %w", s.Name, err)
			}
			ss.Columns = append(ss.Columns, st)
			ss.PeakByMinute = append(ss.PeakByMinute, runs[c].peaks)
		}
		ss.Timeline = scaleTimeline(runs)
		r.rep.Services = append(r.rep.Services, ss)
	}
	if r.started {
		r.rep.Start = time.Unix(0, r.origin).UTC()
	}
	return &r.rep, nil
}

// read reads one input's requests into the sorter.
func (r *scaleRun) read(in Input) {
	f, err := in.Open()
	if err != nil {
		r.rep.Errors = append(r.rep.Errors, in.Name+": "+err.Error())
		r.done += in.Size
		return
	}
	defer f.Close()
	cr := &countingReader{r: f}
	defer func() { r.done += cr.n }()
	d, err := NewAccessDecoder(cr, AccessOptions{Format: r.opt.Format, LogFormat: r.opt.LogFormat, RequestTime: r.opt.RequestTime})
	if err != nil {
		r.rep.Errors = append(r.rep.Errors, in.Name+": "+err.Error())
		return
	}
	r.rep.Inputs++
	defer func() {
		if f := d.Format(); f != "" {
			r.rep.Formats[string(f)]++
		}
		r.rep.Assumed += d.Assumed()
	}()
	var req Request
	var skip *SkipError
	// The lines skipped before the first request are counted once one
	// comes (or the file ends): a file in no format is an error, not its
	// lines skipped.
	var pending []string
	flush := func() {
		for _, s := range pending {
			r.rep.Skipped++
			if len(r.rep.SkipSamples) < maxSamples {
				r.rep.SkipSamples = append(r.rep.SkipSamples, s)
			}
		}
		pending = nil
	}
	for n := 0; r.err == nil; n++ {
		if n%progressEvery == 0 && r.opt.Progress != nil {
			r.opt.Progress(r.done+cr.n, r.total)
		}
		err := d.Next(&req)
		if err == io.EOF {
			flush()
			return
		}
		if errors.As(err, &skip) {
			pending = append(pending, in.Name+": "+skip.Error())
			if len(pending) > MaxUnreadLines {
				flush()
			}
			continue
		}
		if err != nil {
			r.rep.Errors = append(r.rep.Errors, in.Name+": "+err.Error())
			return
		}
		flush()
		r.rep.Requests++
		r.add(&req)
	}
}

// add routes a request and puts it in the sorter.
func (r *scaleRun) add(req *Request) {
	svc := r.route(req)
	if svc < 0 {
		r.rep.Unrouted++
		if len(r.rep.UnroutedSamples) < maxSamples {
			r.rep.UnroutedSamples = append(r.rep.UnroutedSamples, req.Host+req.Path)
		}
		return
	}
	if err := r.sorted.add(sortEntry{at: req.At, x: int64(req.Service), v: int32(svc)}); err != nil {
		r.err = fmt.Errorf("replay: %w", err)
	}
}

// route returns the index of the service that takes req, or -1.
func (r *scaleRun) route(req *Request) int {
	for i, s := range r.opt.Services {
		if r.opt.Service != "" {
			if s.Name == r.opt.Service {
				return i
			}
			continue
		}
		if s.Route != nil {
			if _, ok := s.Route.Match(req.Host, req.Path); ok {
				return i
			}
		}
	}
	return -1
}

// play hands one request to its service's scalers: p.v is the service,
// p.x the request's service time.
func (r *scaleRun) play(p sortEntry) {
	if r.err != nil {
		return
	}
	if !r.started {
		r.started = true
		r.origin = p.at - ((p.at%int64(time.Second))+int64(time.Second))%int64(time.Second)
	}
	at := p.at
	if at-r.origin > int64(sim.MaxRecordedSpan) {
		r.rep.OutOfSpan++
		return
	}
	for _, sc := range r.scalers[p.v] {
		if err := sc.Arrive(time.Duration(at-r.origin), time.Duration(p.x)); err != nil {
			r.err = fmt.Errorf("replay: %w", err)
			return
		}
	}
}
