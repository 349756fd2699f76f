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
// The order of the inputs and of the records in them does not change the
// report: CloudTrail delivers a file about every five minutes per account
// and region and a directory lists them in no useful order, and the
// console's downloads, lookup-events and many Lake and Athena exports list
// the newest first. Every call is sorted by time before it is played
// (sorter.go): in memory up to half a million calls, past that in
// sorted runs spilled to an unlinked temporary file (Options.TempDir;
// 20 bytes a call) and merged; the calls of one instant are played in
// the order of their buckets' keys, not the order they were read in.
// Memory is bounded by that and by the number of distinct buckets, not
// by the log's length. Report.Inexact says, and tollgate replay exits
// non-zero, when an instant held too many calls to be ordered together.
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
// A call whose cost depends on its request (ECS RunTask on Fargate) is
// charged by quota.Service.Charges on its requestParameters — the rule
// tollgate serve applies to the request's body — and takes from every
// bucket it names, all or none (sim.TakeAll); one the rule refuses is
// counted (Report.Refused) and not played, as serve answers it 400.
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

// DefaultWindow is the default of ScaleOptions.Window.
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
	// Seed seeds the retries' jitter.
	Seed uint64
	// TempDir is where the trace of the played calls is kept while the
	// smallest admitting limits are searched (two bytes or so a call,
	// removed at the end); os.TempDir() when empty.
	TempDir string
	// Progress, when not nil, is called now and then with the bytes of
	// the inputs read and their total.
	Progress func(done, total int64)
	// Top, when more than 0, bounds the buckets the report lists to the
	// most throttled; ThrottledOnly lists only those with a throttle.
	// The overrides are those of the buckets listed.
	Top           int
	ThrottledOnly bool
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
	r.sorted = newSorter(opt.TempDir)
	defer r.sorted.close()
	for _, in := range byName(inputs) {
		r.read(in)
		if r.sortErr != nil {
			return nil, fmt.Errorf("replay: %w", r.sortErr)
		}
	}
	// The records' resolutions, the buckets' index and the callers'
	// ids are not needed past the reading: free them for the sorting and
	// the searches (with a million tenants, tens of megabytes).
	r.entries, r.buckets, r.plans, r.callers.ids = nil, nil, nil, [dims]map[string]uint16{}
	inexact, err := r.sorted.drain(r.tieOrder(), r.play)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	if inexact > 0 {
		r.rep.Inexact = append(r.rep.Inexact, fmt.Sprintf("%d instants held more than %d calls each: their calls were played partly in the order the logs hold them, so retries and the calls of several buckets may differ from the sorted log's", inexact, maxInMemory))
	}
	p.Finish()
	if r.rep.Replayed == 0 && r.rep.Inputs > 0 {
		r.rep.Errors = append(r.rep.Errors, fmt.Sprintf("nothing was replayed: of %d records read, %d skipped, %d of services the config does not have, %d of actions it does not know, %d the log's own throttles, %d refused; the formats read are %s",
			r.rep.Records, r.rep.Skipped, sum(r.rep.UnknownServices), sum(r.rep.UnknownActions), r.recorded(), r.rep.Refused, CloudTrailFormats))
	}
	return r.report(), nil
}

func sum(m map[string]int64) (n int64) {
	for _, v := range m {
		n += v
	}
	return n
}

// recorded counts the log's own throttling errors of known buckets.
func (r *run) recorded() (n int64) {
	for i := range r.stats.len() {
		n += r.stats.at(i).recorded
	}
	return n
}

// byName returns inputs sorted by name, so that the skipped records and
// errors a report samples do not depend on the order they were given in.
func byName(inputs []Input) []Input {
	out := slices.Clone(inputs)
	slices.SortStableFunc(out, func(a, b Input) int { return strings.Compare(a.Name, b.Name) })
	return out
}
