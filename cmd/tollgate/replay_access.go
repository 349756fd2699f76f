package main

// This file is the autoscaling half of tollgate replay: HTTP access logs
// played through the config's autoscaled services.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/replay"
	"github.com/tollgate/tollgate/sim"
)

// maxSweepValues bounds the columns of --sweep.
const maxSweepValues = 10

// sweepFlag is --sweep SETTING=V1,V2,...
type sweepFlag replay.Sweep

func (s *sweepFlag) String() string { return "" }

func (s *sweepFlag) Set(v string) error {
	name, list, ok := strings.Cut(v, "=")
	if !ok || !slices.Contains(replay.SweepSettings, name) {
		return fmt.Errorf("want SETTING=V1,V2,... with SETTING one of %s", strings.Join(replay.SweepSettings, ", "))
	}
	vals := strings.Split(list, ",")
	if len(vals) > maxSweepValues {
		return fmt.Errorf("at most %d values", maxSweepValues)
	}
	*s = sweepFlag{Setting: name}
	for _, x := range vals {
		n, err := strconv.Atoi(x)
		if err != nil || n < 0 {
			return fmt.Errorf("value %q: want a whole number", x)
		}
		s.Values = append(s.Values, n)
	}
	return nil
}

// accessFlags are replay's flags for access logs.
type accessFlags struct {
	format      string
	service     string
	sweep       sweepFlag
	coldStart   time.Duration
	logFormat   string
	lf          *replay.LogFormat // logFormat compiled
	requestTime time.Duration
}

// isAccessLog reports whether the logs are access logs rather than
// CloudTrail's: whether the first input that opens and holds more than
// blanks (gunzipped) is in none of CloudTrail's formats and its first line
// is one of an access log's. Inputs that cannot tell are left to the
// replay to report; when none can, the logs are CloudTrail's (whose error
// names every format).
func isAccessLog(inputs []replay.Input) bool {
	for _, in := range inputs {
		if head := sniff(in); len(head) > 0 {
			line, _, _ := bytes.Cut(head, []byte("\n"))
			return !replay.LooksLikeCloudTrail(head) && replay.DetectAccessFormat(line) != ""
		}
	}
	return false
}

// sniff returns the first bytes of an input, gunzipped, without leading
// blanks; nil when it cannot be read or holds none.
func sniff(in replay.Input) []byte {
	f, err := in.Open()
	if err != nil {
		return nil
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var r io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil
		}
		r = zr
	}
	head := make([]byte, 512)
	n, _ := io.ReadFull(r, head)
	return bytes.TrimLeft(head[:n], " \t\r\n")
}

// scaleServices are the autoscaled services of the config at cfgPath,
// routed ones first, most specific first; without a config, the one
// named by --service, with the autoscaler's defaults.
func scaleServices(cfgPath string, af *accessFlags) ([]replay.ScaleService, error) {
	backend := func(a *config.Autoscale) replay.ScaleService {
		b := sim.Backend{ColdStart: af.coldStart, Autoscale: a.Engine}
		if b.ColdStart == 0 {
			b.ColdStart = b.Autoscale.WithDefaults().InitialColdStart
		}
		t := a.RequestTimeout
		if t == 0 {
			t = config.DefaultRequestTimeout
		}
		return replay.ScaleService{Backend: b, RequestTimeout: t}
	}
	if cfgPath == "" {
		if af.service == "" {
			return nil, errors.New("give --config with autoscaled services, or --service NAME for a log of one service")
		}
		s := backend(&config.Autoscale{})
		s.Name = af.service
		return []replay.ScaleService{s}, nil
	}
	cfg, err := config.Load(context.Background(), cfgPath)
	if err != nil {
		return nil, err
	}
	var out []replay.ScaleService
	seen := map[string]bool{}
	add := func(name string, routed bool) {
		a, ok := cfg.Autoscale[name]
		if !ok || seen[name] {
			return
		}
		seen[name] = true
		s := backend(a)
		s.Name = name
		if routed {
			for _, q := range cfg.Quota.Services() {
				if q.Name == name {
					s.Route = q.Route
				}
			}
		}
		out = append(out, s)
	}
	for _, s := range cfg.Quota.Routed() {
		add(s.Name, true)
	}
	for _, s := range cfg.Quota.Services() {
		add(s.Name, false)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no autoscaled service to play the requests through", cfgPath)
	}
	return out, nil
}

// runReplayAccess plays access logs through the autoscaled services.
func runReplayAccess(inputs []replay.Input, cfgPath, tempDir string, asJSON bool, htmlPath string, af *accessFlags, stdout, stderr io.Writer) int {
	services, err := scaleServices(cfgPath, af)
	if err != nil {
		fmt.Fprintln(stderr, "tollgate replay:", err)
		return 1
	}
	opt := replay.ScaleOptions{Services: services, Service: af.service, TempDir: tempDir, Sweep: replay.Sweep(af.sweep)}
	if af.format != "auto" {
		opt.Format = replay.AccessFormat(af.format)
	}
	opt.LogFormat, opt.RequestTime = af.lf, af.requestTime
	bar := newProgress(stderr)
	opt.Progress = bar.update
	rep, err := replay.RunScale(inputs, opt)
	bar.done()
	if err != nil {
		fmt.Fprintln(stderr, "tollgate replay:", err)
		return 1
	}
	if asJSON {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "tollgate replay:", err)
		return 1
	}
	if htmlPath != "" {
		if err := writeFile(htmlPath, rep.WriteHTML); err != nil {
			fmt.Fprintln(stderr, "tollgate replay:", err)
			return 1
		}
	}
	for _, w := range rep.Warnings {
		fmt.Fprintln(stderr, "tollgate replay: warning:", w)
	}
	return replayStatus(stderr, rep.Errors, rep.Inexact)
}
