// Package replay plays recorded API traffic — CloudTrail logs — through
// tollgate's throttle and the clients' retries on a virtual clock, and
// reports what each account's calls would have met: calls throttled with
// and without retries, the first and the worst minute, and the smallest
// limits that would have admitted every call, as config overrides.
//
// Recorded traffic is one more source of the simulator's events, not a
// second simulator: replay reads logs into arrivals and hands them to a
// [sim.Player], which takes tokens from the buckets of package bucket,
// with the limits package quota resolves from the same config `tollgate
// serve` uses (and, through Options.Limits, its approved increases), and
// retries throttled calls as each client group's
// [sim.Retry] says.
//
// # Inputs
//
// CloudTrail log files as AWS delivers them ({"Records":[…]}, gzipped or
// not) and exports of one JSON record a line (CloudTrail Lake, Athena,
// whose lower-case column names are read too), given as files or
// directories in any order. A record needs eventTime,
// eventSource, eventName, awsRegion and userIdentity's accountId or
// accessKeyId; errorCode tells a throttled call. Inputs are streamed:
// records are read one at a time ([Decoder]), never a whole file.
//
// # Ordering
//
// CloudTrail writes a file about every five minutes per account and
// region, each covering its own span, and a directory lists them in no
// useful order. replay opens each input once to read its first record's
// time, plays the inputs in that order, and sorts records within a
// sliding window ([Options.Window], 15 minutes by default) held in a
// heap: a record is played once a record Window later has been read.
// Records later than that are counted (Report.Late) and played at once.
// This bounds memory by the records of one window (and MaxWindowRecords),
// and the rest by the number of distinct buckets, not by the log's length.
//
// # The smallest limits
//
// The limits that would have admitted every call (and 99.9 % of them) are
// exact to the nanosecond of a refill interval. They are searched after
// the replay, by playing the calls again — bucket and instant, as they
// were played — from a trace kept in an unlinked temporary file
// (Options.TempDir; about two bytes a call), a few times, each time with
// many candidate limits per bucket (see limits.go). The inputs are read
// once, and memory stays bounded by the buckets.
//
// # Which calls are played
//
// A record whose errorCode is a throttling error (ThrottlingException,
// RequestLimitExceeded …) is counted as a recorded throttle and compared
// with the replay, but not played: a throttled attempt took no token, and
// its client's retry, when there was one, is a record of its own. A
// record of a service the config does not have, or of an action its
// service does not know, is counted per service and per action.
//
// The account of a call is the config's account for its access key when
// the config maps the key (access_keys), else userIdentity.accountId (or
// recipientAccountId), else the access key itself, as tollgate serve
// does with an unmapped key.
package replay

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/sim"
)

// DefaultWindow is the default of Options.Window.
const DefaultWindow = 15 * time.Minute

// MaxWindowRecords bounds the records held to be sorted: past it, the
// earliest is played even if its window has not passed.
const MaxWindowRecords = 1 << 21

// maxSamples is how many skipped records and unknown names a report
// shows; maxCounted bounds the distinct names counted.
const (
	maxSamples = 5
	maxCounted = 1000
)

// Group is a client group: the accounts that retry alike.
type Group struct {
	// Name labels the group in reports.
	Name string
	// Accounts are the group's accounts; the first group with none takes
	// every account no group names.
	Accounts []string
	// Retry is how the group's clients retry a throttled call; the zero
	// Retry is sim's default (exponential backoff with jitter, 300 s).
	Retry sim.Retry
}

// Options configure a replay.
type Options struct {
	// Quota is the throttling config, as tollgate serve uses it;
	// quota.Builtin() (every built-in preset) when nil.
	Quota *quota.Config
	// Limits, when not nil, gives the limit of a bucket from the one the
	// config gives it, as tollgate serve's approved Service Quotas
	// increases do ([servicequotas.Service.Limit]).
	Limits func(quota.Key, bucket.Limit) bucket.Limit
	// Groups are the client groups; one group, "default", with sim's
	// default retries when empty.
	Groups []Group
	// Window is the span within which records are sorted by time;
	// DefaultWindow when zero.
	Window time.Duration
	// Seed seeds the retries' jitter.
	Seed uint64
	// TempDir is where the trace of the played calls is kept while the
	// smallest admitting limits are searched (two bytes or so a call,
	// removed at the end); os.TempDir() when empty.
	TempDir string
	// Progress, when not nil, is called now and then with the bytes of
	// the inputs read and their total.
	Progress func(done, total int64)
}

// Input is one log to read.
type Input struct {
	// Name names the input in errors: its path.
	Name string
	// Size is its size in bytes, for progress; 0 when unknown.
	Size int64
	// Open opens it; it may be called more than once.
	Open func() (io.ReadCloser, error)
}

// Files returns the inputs of paths: each file, and every regular file
// under each directory, in name order, except hidden ones and CloudTrail's
// digest files (CloudTrail-Digest directories and files), which hold no
// events.
func Files(paths []string) ([]Input, error) {
	var in []Input
	add := func(path string, size int64) {
		in = append(in, Input{Name: path, Size: size, Open: func() (io.ReadCloser, error) { return os.Open(path) }})
	}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			add(p, st.Size())
			continue
		}
		err = filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if path != p && (strings.HasPrefix(d.Name(), ".") || strings.Contains(d.Name(), "CloudTrail-Digest")) {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.Type().IsRegular() {
				info, err := d.Info()
				if err != nil {
					return err
				}
				add(path, info.Size())
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if len(in) == 0 {
		return nil, errors.New("no input files")
	}
	return in, nil
}

// Run replays inputs as opt says. An input that cannot be read, or stops
// being readable part-way, is named in Report.Errors and the others are
// still replayed; Run fails only when opt is invalid.
func Run(inputs []Input, opt Options) (*Report, error) {
	if opt.Quota == nil {
		opt.Quota = quota.Builtin()
	}
	if opt.Window == 0 {
		opt.Window = DefaultWindow
	}
	if opt.Window < 0 {
		return nil, fmt.Errorf("replay: window %v is negative", opt.Window)
	}
	if len(opt.Groups) == 0 {
		opt.Groups = []Group{{Name: "default"}}
	}
	rs := make([]sim.Retry, len(opt.Groups))
	for i, g := range opt.Groups {
		rs[i] = g.Retry
	}
	p, err := sim.NewPlayer(rs, opt.Seed)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	r := newRun(opt, p)
	p.Observe = r.observe
	if r.trace, err = newTrace(opt.TempDir); err != nil {
		r.rep.Errors = append(r.rep.Errors, "limits not searched: "+err.Error())
	} else {
		defer r.trace.close()
	}
	var total int64
	for _, in := range inputs {
		total += in.Size
	}
	r.total = total
	order := r.order(inputs)
	for _, in := range order {
		r.read(in)
	}
	for len(r.window) > 0 {
		r.play(r.window.pop())
	}
	p.Finish()
	return r.report(), nil
}

// order reads the first record of each input and returns the readable
// ones by that time (by name for equal times).
func (r *run) order(inputs []Input) []Input {
	type first struct {
		in Input
		at int64
	}
	var fs []first
	for _, in := range inputs {
		at, err := firstTime(in)
		if err != nil {
			r.fileError(in.Name, err)
			r.done += in.Size
			continue
		}
		fs = append(fs, first{in, at})
	}
	slices.SortStableFunc(fs, func(a, b first) int {
		if a.at != b.at {
			return cmpInt(a.at, b.at)
		}
		return strings.Compare(a.in.Name, b.in.Name)
	})
	out := make([]Input, len(fs))
	for i, f := range fs {
		out[i] = f.in
	}
	return out
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// firstTime returns the time of the first readable record of in; an
// input with none sorts last (the maximum time).
func firstTime(in Input) (int64, error) {
	f, err := in.Open()
	if err != nil {
		return 0, err
	}
	defer f.Close()
	d, err := NewDecoder(f)
	if err != nil {
		return 0, err
	}
	var rec Record
	for range 1000 {
		err := d.Next(&rec)
		var skip *SkipError
		switch {
		case err == nil:
			return rec.Time, nil
		case errors.As(err, &skip):
			continue
		default:
			return 1<<63 - 1, nil // read in full later, which reports its error
		}
	}
	return 1<<63 - 1, nil
}
