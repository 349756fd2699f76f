package replay

// This file is one replay in progress: inputs read, records resolved to
// buckets, their calls sorted by time (sorter.go) and handed to the
// player.

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/retry"
	"github.com/tollgate/tollgate/sim"
)

// maxEntries bounds the records' resolutions kept: past it (a log of many
// tenants) a record is resolved afresh, which costs a few map lookups but
// no memory a tenant.
const maxEntries = 1 << 16

// progressEvery is how many records pass between two Progress calls.
const progressEvery = 1 << 14

// entryKey is what of a record decides its bucket.
type entryKey struct{ source, action, region, account, accessKey string }

// entry is a resolved entryKey: a bucket, or -1 for a call replay does not
// know, with the service or the action it does not know. A call whose
// cost depends on its request (quota.Service.Weighted) has a site, from
// which each record's requestParameters resolve its charges.
type entry struct {
	bucket          int32
	service, action string
	throttle        string // the code the config's service throttles the action with
	site            *chargeSite
}

// chargeSite is what resolves the charges of a call whose cost depends on
// its request: the service and action, and the bucket's account, region
// and client group.
type chargeSite struct {
	svc                     *quota.Service
	action, account, region string
	group                   int32
}

type run struct {
	opt     Options
	player  *sim.Player
	entries map[entryKey]entry
	buckets map[uint64]int32 // the first bucket of each key hash; keyStats.next chains the others
	seed    maphash.Seed
	stats   statTable        // indexed by bucket
	minutes throttledMinutes // of the throttled buckets
	sorted  *sorter
	sortErr error // the sorter could not spill: the replay fails
	total   int64
	done    int64
	rep     Report
	groupOf map[string]int32
	anyIdx  int32
	trace   *traceWriter     // nil when it could not be made
	plans   map[string]int32 // the player's plans by their charges
	callers callers          // who made the calls
	charges []quota.Charge   // scratch of plan
	planKey []byte           // scratch of plan
}

func newRun(opt Options, p *sim.Player) *run {
	r := &run{
		opt:     opt,
		player:  p,
		entries: make(map[entryKey]entry),
		buckets: make(map[uint64]int32),
		seed:    maphash.MakeSeed(),
		groupOf: make(map[string]int32),
		plans:   make(map[string]int32),
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

// read reads one input's calls into the sorter.
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
			if d.good == 0 {
				r.fileError(in.Name, fmt.Errorf("%w: no record in it could be read (%d skipped)", ErrUnknownFormat, d.n))
			}
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
		if r.sortErr != nil {
			return
		}
	}
}

// add resolves a record and puts its call in the sorter.
func (r *run) add(rec *Record) {
	k := entryKey{rec.Source, rec.Action, rec.Region, rec.Account, rec.AccessKey}
	e, ok := r.entries[k]
	if !ok {
		e = r.resolve(rec)
		if len(r.entries) < maxEntries {
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
	st := r.stats.at(int(e.bucket))
	if rec.ErrorCode != "" && (isThrottle(rec.ErrorCode, e.throttle) || r.serviceThrottle(rec)) {
		st.recorded++
		return
	}
	v := e.bucket
	if e.site != nil {
		plan, err := r.plan(e.site, rec.Params)
		if err != nil {
			r.rep.Refused++
			if len(r.rep.RefusedSamples) < maxSamples {
				r.rep.RefusedSamples = append(r.rep.RefusedSamples, rec.Action+" at "+time.Unix(0, rec.Time).UTC().Format(time.RFC3339)+": "+err.Error())
			}
			return
		}
		v = ^plan
	}
	r.rep.Replayed++
	r.sortErr = r.sorted.add(sortEntry{at: rec.Time, v: v, x: int64(r.callers.id(rec))})
}

// isThrottle reports whether a record's errorCode is a throttle: the code
// the config's service throttles the action with, or any of the AWS SDK's
// throttling codes, as CloudTrail logs them — EC2's with the SOAP fault's
// "Client." prefix ("Client.RequestLimitExceeded").
func isThrottle(code, own string) bool {
	code = faultCode(code)
	return code == faultCode(own) || retry.IsThrottleCode(code)
}

// faultCode is an error code without a SOAP fault's "Client." or
// "Server." prefix, as EC2 writes its codes in CloudTrail.
func faultCode(code string) string {
	if c, ok := strings.CutPrefix(code, "Client."); ok {
		return c
	}
	if c, ok := strings.CutPrefix(code, "Server."); ok {
		return c
	}
	return code
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
	g, ok := r.groupOf[account]
	if !ok {
		// The catch-all group, or, when every group names its accounts,
		// the first.
		g = max(r.anyIdx, 0)
	}
	e := entry{bucket: r.bucket(key, limit, g)}
	if cat, ok := svc.CategoryOf(rec.Action); ok {
		e.throttle = svc.ThrottleOf(cat).Code
	}
	if svc.Weighted(rec.Action) {
		e.site = &chargeSite{svc: svc, action: rec.Action, account: account, region: rec.Region, group: g}
	}
	return e
}

// bucket returns the index of the bucket of key, adding it, of limit (as
// Options.Limits changes it) and client group g, on first sight.
//
// The buckets are found by their key's hash, chained through
// keyStats.next on a collision, rather than by their keys: a map of keys
// would hold every key twice, a hundred bytes a bucket.
func (r *run) bucket(key quota.Key, limit bucket.Limit, g int32) int32 {
	bk := r.stats.intern(key)
	h := maphash.Comparable(r.seed, bk)
	first, ok := r.buckets[h]
	if ok {
		for b := first; b >= 0; b = r.stats.at(int(b)).next {
			if r.stats.at(int(b)).key == bk {
				return b
			}
		}
	}
	if r.opt.Limits != nil {
		limit = r.opt.Limits(key, limit)
	}
	b := r.player.AddBucket(limit)
	st := newKeyStats(bk, g)
	if ok {
		st.next = first
	}
	r.buckets[h] = b
	r.stats.add(st)
	return b
}

// plan returns the player's plan of a call at site whose request is
// params: the buckets quota.Service.Charges says it takes from, as tollgate
// serve charges the same request's body. A request the charging rules
// refuse (serve answers it 400, taking nothing) is an error.
func (r *run) plan(site *chargeSite, params []byte) (int32, error) {
	cs, err := site.svc.Charges(site.action, params, r.charges[:0])
	r.charges = cs[:0]
	if err != nil {
		return 0, err
	}
	var sc [4]sim.Charge
	plan := sc[:0]
	r.planKey = r.planKey[:0]
	for _, ch := range cs {
		key := quota.Key{Service: site.svc.Name, Account: site.account, Region: site.region, Category: ch.Category.Name}
		limit, _ := r.opt.Quota.Limit(key)
		b := r.bucket(key, limit, site.group)
		plan = append(plan, sim.Charge{Bucket: b, Tokens: ch.Tokens})
		r.planKey = binary.AppendUvarint(binary.AppendUvarint(r.planKey, uint64(b)), uint64(ch.Tokens))
	}
	if p, ok := r.plans[string(r.planKey)]; ok {
		return p, nil
	}
	p, err := r.player.AddCharges(plan)
	if err != nil {
		return 0, err
	}
	r.plans[string(r.planKey)] = p
	return p, nil
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

// tieOrder returns the order of the calls of one instant: by their
// buckets' keys, then a plan's by its charges, so that it does not depend
// on the order the records were read in.
func (r *run) tieOrder() func(a, b sortEntry) int {
	idx := make([]int32, r.stats.len())
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int {
		ka, kb := r.stats.key(int(a)), r.stats.key(int(b))
		return cmp.Or(cmp.Compare(ka.Service, kb.Service), cmp.Compare(ka.Account, kb.Account),
			cmp.Compare(ka.Region, kb.Region), cmp.Compare(ka.Category, kb.Category))
	})
	rank := make([]int32, len(idx))
	for i, b := range idx {
		rank[b] = int32(i)
	}
	n := r.player.Plans()
	plans := make([]int32, n)
	for i := range plans {
		plans[i] = int32(i)
	}
	slices.SortFunc(plans, func(a, b int32) int {
		return slices.CompareFunc(r.player.Plan(a), r.player.Plan(b), func(x, y sim.Charge) int {
			return cmp.Or(cmp.Compare(rank[x.Bucket], rank[y.Bucket]), cmp.Compare(x.Tokens, y.Tokens))
		})
	})
	planRank := make([]int32, n)
	for i, p := range plans {
		planRank[p] = int32(len(rank) + i)
	}
	of := func(v int32) int32 {
		if v < 0 {
			return planRank[^v]
		}
		return rank[v]
	}
	return func(a, b sortEntry) int {
		return cmp.Or(cmp.Compare(of(a.v), of(b.v)), r.callers.compare(uint64(a.x), uint64(b.x)))
	}
}

// play hands one call to the player: a bucket's (a.v ≥ 0) or a plan's
// (^a.v).
func (r *run) play(a sortEntry) {
	at := a.at
	if a.v < 0 {
		r.playCharged(at, ^a.v, uint64(a.x))
		return
	}
	st, lim := r.stats.at(int(a.v)), r.player.Limit(a.v)
	if r.trace != nil {
		flags := uint8(0)
		if !st.arrive(at, lim, &r.minutes) {
			flags = traceThrottled
		}
		r.trace.add(a.v, at, uint64(a.x), flags)
	} else {
		st.arrive(at, lim, &r.minutes)
	}
	// The bucket index is valid and the group in range: Arrive cannot fail.
	_ = r.player.Arrive(at, a.v, st.group)
}

// playCharged plays a call that takes plan's charges, all or none. Without
// retries, it is throttled as tollgate serve counts it: by its own
// category (the first charge) and by the bucket it was short of.
func (r *run) playCharged(at int64, plan int32, caller uint64) {
	cs := r.player.Plan(plan)
	var (
		lim [4]bucket.Limit
		sts [4]bucket.State
		loc [4]sim.Charge
		out [4]bucket.Decision
	)
	n := min(len(cs), len(lim)) // Charges gives at most three
	for i, c := range cs[:n] {
		st, l := r.stats.at(int(c.Bucket)), r.player.Limit(c.Bucket)
		st.count(at, c.Tokens, int64(l.Interval()))
		lim[i], sts[i], loc[i] = l, st.noRetry, sim.Charge{Bucket: int32(i), Tokens: c.Tokens}
	}
	short := sim.TakeAll(lim[:n], sts[:n], loc[:n], at, out[:n])
	if short < 0 {
		for i, c := range cs[:n] {
			r.stats.at(int(c.Bucket)).noRetry = sts[i]
		}
	} else {
		r.stats.at(int(cs[0].Bucket)).throttle(at, &r.minutes)
		if short > 0 {
			r.stats.at(int(cs[short].Bucket)).throttle(at, &r.minutes)
		}
	}
	if r.trace != nil {
		for i, c := range cs[:n] {
			flags := uint8(0)
			if short >= 0 && (i == 0 || i == short) {
				flags = traceThrottled
			}
			for range c.Tokens {
				r.trace.add(c.Bucket, at, caller, flags)
				flags = traceToken
			}
		}
	}
	// The plan is valid and the group in range: ArriveCharged cannot fail.
	_ = r.player.ArriveCharged(at, plan, r.stats.at(int(cs[0].Bucket)).group)
}

// observe counts an attempt of the player's, as tollgate serve counts a
// request: one of several buckets counts on each bucket when allowed, and
// when refused on its own category and on the bucket it was short of.
func (r *run) observe(a sim.Attempt) {
	if a.Plan < 0 {
		r.count(r.stats.at(int(a.Bucket)), a)
		return
	}
	cs := r.player.Plan(a.Plan)
	if a.Allowed {
		for _, c := range cs {
			r.count(r.stats.at(int(c.Bucket)), a)
		}
		return
	}
	r.count(r.stats.at(int(cs[0].Bucket)), a)
	if a.Short > 0 {
		r.count(r.stats.at(int(cs[a.Short].Bucket)), a)
	}
}

func (r *run) count(st *keyStats, a sim.Attempt) {
	st.attempts++
	if !a.Allowed {
		st.throttledAttempts++
	}
	if a.GaveUp {
		st.failed++
	}
}

// minuteOf is the start of the minute of a Unix-nanosecond instant.
func minuteOf(at int64) int64 { return at - at%int64(time.Minute) }
