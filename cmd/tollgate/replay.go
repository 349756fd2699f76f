package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/replay"
	"github.com/tollgate/tollgate/sim"
)

func replayCommand() command {
	return command{
		summary: "play recorded CloudTrail logs through the throttle and retries (throttles, overrides that admit every call), or HTTP access logs through the autoscaler",
		run:     runReplay,
	}
}

// replaySynopsis is the head of `tollgate replay --help`.
const replaySynopsis = `tollgate replay [--config FILE] [--applied FILE] [--retry POLICY] [--group NAME=ACCOUNT,...:POLICY]... [--json] [--html FILE] FILE|DIR...
       tollgate replay [--config FILE] [--service NAME] [--format FORMAT] [--sweep SETTING=V1,V2,...] [--cold-start SPAN] [--json] [--html FILE] FILE|DIR...

Reads CloudTrail log files ({"Records":[...]}, gzipped or not) and exports of
one JSON record a line, in any order, plays their calls at their recorded
times through the config's buckets (as tollgate serve would, with the
approved increases of --applied) and each client group's retries, and
reports per account, region and category the calls throttled, and the
overrides that would have admitted them all. POLICY is
default (exponential backoff with jitter, 300 s), none, or a number of
attempts with the default backoff. Exit status 1 when an input could not be
read to its end (the others are still reported).

HTTP access logs (nginx combined with $request_time last, AWS ALB, Envoy's
default format; detected per file, or --format) are played instead
through the config's autoscaled services, each request to the service
whose route takes it (or to --service): the report gives per service the
instances over time (peak, mean), cold starts, pending requests and their
waits, 429s, requests over request_timeout and instance-seconds; --sweep
gives them for each value of max_concurrency, min_instances or
max_instances, side by side. --html writes either report as one
self-contained page with its figures: the most throttled buckets' calls
over time, or each service's instances, pending requests and 429s.`

// groupFlag collects --group NAME=ACCOUNT,...:POLICY.
type groupFlag []replay.Group

func (g *groupFlag) String() string { return "" }

func (g *groupFlag) Set(s string) error {
	name, rest, ok := strings.Cut(s, "=")
	accounts, policy, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || name == "" || accounts == "" {
		return fmt.Errorf("want NAME=ACCOUNT[,ACCOUNT...]:POLICY, e.g. batch=111122223333:none")
	}
	rt, err := retryPolicy(policy)
	if err != nil {
		return err
	}
	*g = append(*g, replay.Group{Name: name, Accounts: strings.Split(accounts, ","), Retry: rt})
	return nil
}

// retryPolicy parses a POLICY: default, none, or a number of attempts.
func retryPolicy(s string) (sim.Retry, error) {
	switch s {
	case "default":
		return sim.Retry{}, nil
	case "none":
		return sim.Retry{Disabled: true}, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 100 {
		return sim.Retry{}, fmt.Errorf("retry policy %q: want default, none, or a number of attempts from 1 to 100", s)
	}
	return sim.Retry{MaxAttempts: n}, nil
}

// replayGCPercent is the garbage collector's GOGC during a CloudTrail
// replay, unless the environment sets GOGC: a replay's memory is its
// buckets', held to the end, and collecting when the heap has grown by
// half of it rather than all of it keeps a million tenants' replay under
// 600 MB for a few percent more CPU (BENCHMARKS.md).
const replayGCPercent = 50

func runReplay(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("replay")
	cfgPath := fs.String("config", "", "quota config `FILE`, as tollgate serve takes it (default: every built-in preset, as tollgate check --preset lists them: ecs, cloudmap, servicequotas, ec2, sts, ssm, kms, secretsmanager)")
	appliedPath := fs.String("applied", "", "`FILE` of the Service Quotas values in force (approved increases), as GET /v1/admin/servicequotas/applied answers")
	retryFlag := fs.String("retry", "default", "retry `POLICY` of the accounts no --group names: default, none, or a number of attempts")
	var groups groupFlag
	fs.Var(&groups, "group", "a client group and its retry `POLICY`: NAME=ACCOUNT[,ACCOUNT...]:POLICY (repeatable)")
	asJSON := fs.Bool("json", false, "write the report as JSON")
	htmlPath := fs.String("html", "", "also write the report as one self-contained HTML page to `FILE`")
	tempDir := fs.String("temp-dir", "", "`DIR` for the calls spilled to be sorted by time and the trace the limits are searched on (default the system's)")
	seed := fs.Uint64("seed", 0, "random seed of the retries' jitter")
	top := fs.Int("top", 0, "list only the `N` most throttled buckets (0: all)")
	throttledOnly := fs.Bool("throttled-only", false, "list only the buckets with a throttle")
	var af accessFlags
	fs.StringVar(&af.format, "format", "auto", "the logs' `FORMAT`: auto, cloudtrail, or an access log's: combined, alb, envoy")
	fs.StringVar(&af.logFormat, "log-format", "", "read access logs in the layout of an nginx log_format `STRING` ('$remote_addr [$time_local] \"$request\" rt=$request_time', or combined: nginx's own)")
	durationVar(fs, &af.requestTime, "request-time", 0, "assume each request of an access log without a request time ran this `SPAN` (nginx's combined format has none)")
	fs.StringVar(&af.service, "service", "", "play every request of an access log through the autoscaled service `NAME` (without --config: one with the autoscaler's defaults)")
	fs.Var(&af.sweep, "sweep", "play access logs once per value of an autoscale `SETTING=V1,V2,...` (max_concurrency, min_instances, max_instances)")
	durationVar(fs, &af.coldStart, "cold-start", 0, "the `SPAN` an instance takes to start, in access-log replays (default the service's initial_cold_start)")
	if code, ok := parseFlags(fs, replaySynopsis, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() == 0 {
		return usageError(stderr, "replay", "give the log files or directories to replay")
	}
	switch af.format {
	case "auto", "cloudtrail", "combined", "alb", "envoy":
	default:
		return usageError(stderr, "replay", "--format %q: want auto, cloudtrail, combined, alb or envoy", af.format)
	}
	if af.coldStart < 0 || af.coldStart > time.Hour {
		return usageError(stderr, "replay", "--cold-start %v: want a span from 0 to 1h", af.coldStart)
	}
	rt, err := retryPolicy(*retryFlag)
	if err != nil {
		return usageError(stderr, "replay", "--retry: %v", err)
	}
	inputs, err := replay.Files(fs.Args())
	if err != nil {
		fmt.Fprintln(stderr, "tollgate replay:", err)
		return 1
	}
	if af.requestTime < 0 || af.requestTime > replay.MaxServiceTime {
		return usageError(stderr, "replay", "--request-time %v: want a span from 0 to %v", af.requestTime, replay.MaxServiceTime)
	}
	if af.logFormat != "" {
		if af.lf, err = replay.ParseLogFormat(af.logFormat); err != nil {
			return usageError(stderr, "replay", "--log-format: %v", err)
		}
		if af.format != "auto" {
			return usageError(stderr, "replay", "--log-format gives the layout: leave --format out")
		}
	}
	access := af.format != "auto" && af.format != "cloudtrail" || af.service != "" || len(af.sweep.Values) > 0 || af.lf != nil || af.requestTime > 0
	if af.format == "auto" && !access {
		access = isAccessLog(inputs)
	}
	if access {
		if *appliedPath != "" || len(groups) > 0 {
			return usageError(stderr, "replay", "--applied and --group are for CloudTrail logs, not access logs")
		}
		return runReplayAccess(inputs, *cfgPath, *tempDir, *asJSON, *htmlPath, &af, stdout, stderr)
	}
	rest := "others"
	if len(groups) == 0 {
		rest = "all"
	}
	if *top < 0 {
		return usageError(stderr, "replay", "--top %d: want 0 (all) or more", *top)
	}
	opt := replay.Options{Quota: quota.Builtin(), TempDir: *tempDir, Seed: *seed, Top: *top, ThrottledOnly: *throttledOnly,
		Groups: append([]replay.Group(groups), replay.Group{Name: rest, Retry: rt})}
	if *cfgPath != "" {
		cfg, err := config.Load(context.Background(), *cfgPath)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		opt.Quota = cfg.Quota
	}
	if *appliedPath != "" {
		if opt.Limits, err = appliedLimits(opt.Quota, *appliedPath); err != nil {
			fmt.Fprintf(stderr, "tollgate replay: %s: %v\n", *appliedPath, err)
			return 1
		}
	}
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(replayGCPercent))
	}
	bar := newProgress(stderr)
	opt.Progress = bar.update
	rep, err := replay.Run(inputs, opt)
	bar.done()
	if err != nil {
		fmt.Fprintln(stderr, "tollgate replay:", err)
		return 1
	}
	if *asJSON {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "tollgate replay:", err)
		return 1
	}
	if *htmlPath != "" {
		if err := writeFile(*htmlPath, rep.WriteHTML); err != nil {
			fmt.Fprintln(stderr, "tollgate replay:", err)
			return 1
		}
	}
	for _, e := range rep.Errors {
		if strings.Contains(e, replay.ErrUnknownFormat.Error()) {
			fmt.Fprintln(stderr, "tollgate replay: access logs are read too: nginx's combined (with $request_time last, or --request-time), ALB, Envoy, or any layout given as --log-format")
			break
		}
	}
	return replayStatus(stderr, rep.Errors, rep.Inexact)
}

// replayStatus names on stderr the inputs that could not be read and what
// could not be replayed exactly, and returns the exit status: 1 for any.
func replayStatus(stderr io.Writer, errs, inexact []string) int {
	for _, e := range errs {
		fmt.Fprintln(stderr, "tollgate replay:", e)
	}
	for _, e := range inexact {
		fmt.Fprintln(stderr, "tollgate replay: NOT EXACT:", e)
	}
	if len(errs)+len(inexact) > 0 {
		return 1
	}
	return 0
}

// writeFile creates path and writes it with write.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// appliedLimits reads a file of applied values into Options.Limits.
func appliedLimits(cfg *quota.Config, path string) (func(quota.Key, bucket.Limit) bucket.Limit, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	applied, err := replay.ReadApplied(f)
	if err != nil {
		return nil, err
	}
	return replay.AppliedLimits(cfg, applied)
}

// progress draws a bar of the bytes read on a terminal, at most five
// times a second; it draws nothing when w is not a terminal.
type progress struct {
	w     io.Writer
	now   func() time.Time
	last  time.Time
	drawn bool
}

func newProgress(w io.Writer) *progress {
	f, ok := w.(*os.File)
	if !ok {
		return &progress{}
	}
	if st, err := f.Stat(); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return &progress{}
	}
	return &progress{w: w, now: time.Now}
}

func (p *progress) update(done, total int64) {
	if p.w == nil || total <= 0 || p.now().Sub(p.last) < 200*time.Millisecond {
		return
	}
	p.last = p.now()
	frac := min(float64(done)/float64(total), 1)
	n := int(frac * 30)
	unit, shift := "MB", 20
	if total < 10<<20 {
		unit, shift = "kB", 10
	}
	fmt.Fprintf(p.w, "\r[%s%s] %3.0f%%  %d/%d %s", strings.Repeat("=", n), strings.Repeat(" ", 30-n), frac*100, done>>shift, total>>shift, unit)
	p.drawn = true
}

func (p *progress) done() {
	if p.drawn {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", 60))
	}
}
