package replay

// This file is one replay in progress: inputs read into the sorting
// window, records resolved to buckets, and calls handed to the player.

import (
	"errors"
	"io"
	"strings"
	"time"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/sim"
)

// progressEvery is how many records pass between two Progress calls.
const progressEvery = 1 << 14

// entryKey is what of a record decides its bucket.
type entryKey struct{ source, action, region, account, accessKey string }

// entry is a resolved entryKey: a bucket, or -1 for a call replay does not
// know, with the service or the action it does not know.
type entry struct {
	bucket          int32
	service, action string
}

type run struct {
	opt     Options
	player  *sim.Player
	entries map[entryKey]entry
	buckets map[quota.Key]int32
	stats   []*keyStats
	window  arrivalHeap
	seq     uint64
	maxSeen int64
	played  int64 // instant of the last arrival played
	total   int64
	done    int64
	rep     Report
	groupOf map[string]int32
	anyIdx  int32
	trace   *traceWriter // nil when it could not be made
}

func newRun(opt Options, p *sim.Player) *run {
	r := &run{
		opt:     opt,
		player:  p,
		entries: make(map[entryKey]entry),
		buckets: make(map[quota.Key]int32),
		groupOf: make(map[string]int32),
		anyIdx:  -1,
	}
	for i, g := range opt.Groups {
		if len(g.Accounts) == 0 && r.anyIdx < 0 {
			r.anyIdx = int32(i)
		}
		for _, a := range g.Accounts {
			if _, dup := r.groupOf[a]; !dup {
				r.groupOf[a] = int32(i)
			}
		}
	}
	r.rep.Window = opt.Window
	r.rep.UnknownServices = map[string]int64{}
	r.rep.UnknownActions = map[string]int64{}
	return r
}

func (r *run) fileError(name string, err error) {
	r.rep.Errors = append(r.rep.Errors, name+": "+err.Error())
}

// countingReader counts the bytes read of an input, for progress.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// read reads one input into the window, playing what leaves it.
func (r *run) read(in Input) {
	f, err := in.Open()
	if err != nil {
		r.fileError(in.Name, err)
		r.done += in.Size
		return
	}
	defer f.Close()
	cr := &countingReader{r: f}
	defer func() { r.done += cr.n }()
	d, err := NewDecoder(cr)
	if err != nil {
		r.fileError(in.Name, err)
		return
	}
	r.rep.Inputs++
	var rec Record
	var skip *SkipError // outside the loop: it escapes, once
	for n := 0; ; n++ {
		if n%progressEvery == 0 && r.opt.Progress != nil {
			r.opt.Progress(r.done+cr.n, r.total)
		}
		err := d.Next(&rec)
		if err == io.EOF {
			return
		}
		if errors.As(err, &skip) {
			r.rep.Skipped++
			if len(r.rep.SkipSamples) < maxSamples {
				r.rep.SkipSamples = append(r.rep.SkipSamples, in.Name+": "+skip.Error())
			}
			continue
		}
		if err != nil {
			r.fileError(in.Name, err)
			return
		}
		r.rep.Records++
		r.add(&rec)
	}
}

// add resolves a record and puts its call in the window.
func (r *run) add(rec *Record) {
	k := entryKey{rec.Source, rec.Action, rec.Region, rec.Account, rec.AccessKey}
	e, ok := r.entries[k]
	if !ok {
		e = r.resolve(rec)
		if len(r.entries) < 1<<20 {
			r.entries[k] = e
		}
	}
	if e.bucket < 0 {
		if e.service != "" {
			r.rep.unknownService(e.service)
		} else {
			r.rep.unknownAction(e.action)
		}
		return
	}
	st := r.stats[e.bucket]
	if rec.ErrorCode != "" && r.isThrottle(rec) {
		st.recorded++
		return
	}
	r.rep.Replayed++
	if rec.Time < r.played {
		r.rep.Late++
	}
	r.seq++
	r.window.push(rec.Time, r.seq, e.bucket)
	r.maxSeen = max(r.maxSeen, rec.Time)
	for len(r.window) > 0 && (r.window.minAt() < r.maxSeen-int64(r.opt.Window) || len(r.window) > MaxWindowRecords) {
		r.play(r.window.pop())
	}
}

// resolve finds the bucket of a record's call, adding it on first sight,
// or counts the call as unknown.
func (r *run) resolve(rec *Record) entry {
	svc := r.service(rec.Source)
	if svc == nil {
		return entry{bucket: -1, service: rec.Source}
	}
	account := rec.Account
	if rec.AccessKey != "" {
		if a := r.opt.Quota.Account(rec.AccessKey); a != rec.AccessKey || account == "" {
			account = a
		}
	}
	key, limit, err := r.opt.Quota.Resolve(svc.Name, account, rec.Region, rec.Action)
	if err != nil {
		return entry{bucket: -1, action: svc.Name + " " + rec.Action}
	}
	if b, ok := r.buckets[key]; ok {
		return entry{bucket: b}
	}
	if r.opt.Limits != nil {
		limit = r.opt.Limits(key, limit)
	}
	g, ok := r.groupOf[account]
	if !ok {
		// The catch-all group, or, when every group names its accounts,
		// the first.
		g = max(r.anyIdx, 0)
	}
	b := r.player.AddBucket(limit)
	r.buckets[key] = b
	r.stats = append(r.stats, newKeyStats(key, limit, g))
	return entry{bucket: b}
}

// service returns the config's service of an eventSource
// ("ecs.amazonaws.com"): the one whose SigV4 signing name, or name, is the
// source's first label.
func (r *run) service(source string) *quota.Service {
	name, _, _ := strings.Cut(source, ".")
	var byName *quota.Service
	for _, s := range r.opt.Quota.Services() {
		if s.SigningName == name {
			return s
		}
		if s.Name == name && byName == nil {
			byName = s
		}
	}
	return byName
}

// play hands one call to the player.
func (r *run) play(a arrival) {
	at := max(a.at, r.played)
	r.played = at
	st := r.stats[a.v]
	st.arrive(at)
	if r.trace != nil {
		r.trace.add(a.v, at)
	}
	// The bucket index is valid and the group in range: Arrive cannot fail.
	_ = r.player.Arrive(at, a.v, st.group)
}

func (r *run) observe(a sim.Attempt) {
	st := r.stats[a.Bucket]
	st.attempts++
	if !a.Allowed {
		st.throttledAttempts++
	}
	if a.GaveUp {
		st.failed++
	}
}

// arrival is one call waiting in the sorting window: its bucket.
type arrival = timed[int32]

// arrivalHeap is a min-heap of arrivals by (at, seq).
type arrivalHeap = timeHeap[int32]

// minuteOf is the start of the minute of a Unix-nanosecond instant.
func minuteOf(at int64) int64 { return at - at%int64(time.Minute) }
