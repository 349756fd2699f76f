package liveview

import (
	"cmp"
	"context"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// Defaults of Options.
const (
	DefaultHistory     = 600 // seconds: 10 minutes
	DefaultHotWindow   = 60  // seconds
	DefaultHotCapacity = 128 // keys per second
)

// Options configure a Recorder. The zero value keeps 10 minutes of history
// and the hottest keys of the last minute.
type Options struct {
	// History is how many per-second points are kept; 0 means
	// DefaultHistory.
	History int
	// HotWindow is how many seconds the hottest keys are counted over; 0
	// means DefaultHotWindow.
	HotWindow int
	// HotCapacity is how many throttled keys each second's Space-Saving
	// summary tracks; 0 means DefaultHotCapacity. Counts are exact for a
	// second with at most this many distinct throttled keys; otherwise a
	// key's count may be over-estimated by at most that second's
	// throttles divided by HotCapacity (reported as HotKey.ErrorBound).
	HotCapacity int
	// Services, when set, reports the autoscaled services' state; Tick
	// calls it once per tick, before taking the recorder's lock, and keeps
	// its answer (which it must not change afterwards) for Services.
	Services func() []ServiceSample
	// UsageWindow is how many minutes the utilisation view (Usage)
	// covers; 0 means DefaultUsageWindow, the last hour.
	UsageWindow int
	// UsageCapacity is how many buckets each minute keeps, both among
	// the most throttled (counted like HotCapacity's) and among the most
	// used (exact peaks; see UsageView.PeakFloor); 0 means
	// DefaultUsageCapacity.
	UsageCapacity int
}

// Recorder records decisions; see the package documentation. It is safe
// for concurrent use.
type Recorder struct {
	history, hotWindow, hotCap int

	seriesMu sync.Mutex
	series   []*Series // in creation order
	byName   map[[2]string]*Series

	// The decision path appends throttled keys to a shard's buffer; fold
	// moves them into the current second's summary.
	shards    []pendingShard
	shardMask uint32
	wake      chan struct{} // a buffer is half full: Run folds

	foldMu     sync.Mutex   // guards hot, hotBuf, spare and curDropped
	hot        *spaceSaving // the current second's throttled keys
	hotBuf     *spaceSaving // the spare summary, swapped in by Tick
	spare      []byte       // the spare buffer, swapped into a shard by fold
	curDropped uint64       // throttles dropped in the current second, as of the last fold
	dropped    atomic.Uint64
	use        usage         // per-minute utilisation, guarded by foldMu
	useFloor   atomic.Uint64 // the current minute's peak floor, for Used

	mu    sync.Mutex // guards what Tick writes and the views read
	ticks []tick     // ring of History ticks
	n     int        // ticks taken so far; the newest is ticks[(n-1)%History]
	last  time.Time  // the previous tick
	slots []hotSlot  // ring of HotWindow closed summaries, aligned with ticks

	sample func() []ServiceSample
	svc    [][]ServiceSample // ring aligned with ticks; nil without Options.Services
}

// tick is one point of history: the counts of (start, end].
type tick struct {
	end time.Time
	dur time.Duration
}

// hotSlot is one closed second of throttled keys.
type hotSlot struct {
	entries []hotEntry
	floor   uint64 // the most an absent key was throttled in that second
	dropped uint64 // throttles of that second that no summary counted
	dur     time.Duration
}

// shardBuffer is the size of each shard's buffer of throttled keys: about
// 1,450 keys of 45 bytes. A shard wakes Run once it is half full, so Run
// has the time of about 700 throttles to be scheduled; at 200,000 throttles
// a second on two CPUs, 7 ms.
const shardBuffer = 64 << 10

// maxShards bounds the number of shards (one per CPU, a power of two).
const maxShards = 32

// pendingShard holds throttled keys not yet in the summary, as records
// (see appendRecord): copies, so a key pins none of its request's memory.
type pendingShard struct {
	mu      sync.Mutex
	buf     []byte // capacity shardBuffer
	dropped uint64 // throttles refused since the last fold: buf was full
	_       [64]byte
}

// Series counts the decisions of one service and category. A nil *Series
// counts nothing, so callers need not check for a recorder.
type Series struct {
	service, category            string
	allowed, throttled, errored  atomic.Uint64
	seenAllowed, seenThrottled   uint64 // cumulative counts at the previous tick
	seenErrored                  uint64
	pAllowed, pThrottled, pError []uint64 // rings aligned with Recorder.ticks
}

// New returns a recorder.
func New(opts Options) *Recorder {
	r := &Recorder{history: opts.History, hotWindow: opts.HotWindow, hotCap: opts.HotCapacity, byName: map[[2]string]*Series{}}
	if r.history <= 0 {
		r.history = DefaultHistory
	}
	if r.hotWindow <= 0 {
		r.hotWindow = DefaultHotWindow
	}
	if r.hotCap <= 0 {
		r.hotCap = DefaultHotCapacity
	}
	r.ticks = make([]tick, r.history)
	r.slots = make([]hotSlot, r.hotWindow)
	r.hot = newSpaceSaving(r.hotCap)
	r.hotBuf = newSpaceSaving(r.hotCap)
	if opts.Services != nil {
		r.sample = opts.Services
		r.svc = make([][]ServiceSample, r.history)
	}
	n := 1 << bits.Len(uint(min(runtime.GOMAXPROCS(0), maxShards)-1)) // a power of two
	r.shards = make([]pendingShard, n)
	for i := range r.shards {
		r.shards[i].buf = make([]byte, 0, shardBuffer)
	}
	r.shardMask = uint32(n - 1)
	r.spare = make([]byte, 0, shardBuffer)
	r.wake = make(chan struct{}, 1)
	window, ucap := opts.UsageWindow, opts.UsageCapacity
	if window <= 0 {
		window = DefaultUsageWindow
	}
	if ucap <= 0 {
		ucap = DefaultUsageCapacity
	}
	r.use = newUsage(window, ucap, n)
	return r
}

// Series returns the series of a service's category, making it on first
// use. On a nil Recorder it returns nil.
func (r *Recorder) Series(service, category string) *Series {
	if r == nil {
		return nil
	}
	r.seriesMu.Lock()
	defer r.seriesMu.Unlock()
	if s, ok := r.byName[[2]string{service, category}]; ok {
		return s
	}
	s := &Series{service: service, category: category,
		pAllowed: make([]uint64, r.history), pThrottled: make([]uint64, r.history), pError: make([]uint64, r.history)}
	r.byName[[2]string{service, category}] = s
	r.series = append(r.series, s)
	return s
}

// Count records one decision the store made.
func (s *Series) Count(allowed bool) {
	if s == nil {
		return
	}
	if allowed {
		s.allowed.Add(1)
	} else {
		s.throttled.Add(1)
	}
}

// Error records one request the store could not decide.
func (s *Series) Error() {
	if s != nil {
		s.errored.Add(1)
	}
}

// Throttled records that the bucket k throttled a request. Nil-safe.
//
// It copies the key into a buffer (one of a few, picked at random, so
// concurrent callers seldom share one) and returns; Run, or the next Tick,
// counts it into the heavy-hitters summary. When that buffer is full the
// throttle is dropped and counted (see Hot and Dropped): the decision
// path never waits for the summary, and memory stays bounded.
func (r *Recorder) Throttled(k quota.Key) {
	if r == nil {
		return
	}
	sh := &r.shards[rand.Uint32()&r.shardMask]
	n := recordLen(k)
	sh.mu.Lock()
	had := len(sh.buf)
	if had+n > cap(sh.buf) {
		sh.dropped++
		sh.mu.Unlock()
		return
	}
	sh.buf = appendRecord(sh.buf, k)
	sh.mu.Unlock()
	if had < shardBuffer/2 && had+n >= shardBuffer/2 {
		select {
		case r.wake <- struct{}{}:
		default: // a fold is already due
		}
	}
}

// Dropped returns how many throttles, since the recorder was made, no
// summary counted because their buffer was full (the summaries could not
// keep up, or nothing called Run or Tick), as of the last fold: at most a
// second ago while Run runs.
func (r *Recorder) Dropped() uint64 { return r.dropped.Load() }

// fold moves the buffered throttled keys into the current second's
// summary; the caller holds foldMu. Each shard's lock is held only to
// swap its buffer for the spare one.
func (r *Recorder) fold() {
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		buf, dropped := sh.buf, sh.dropped
		if len(buf) > 0 {
			sh.buf = r.spare
		}
		sh.dropped = 0
		sh.mu.Unlock()
		r.curDropped += dropped
		r.use.curDropped += dropped
		r.dropped.Add(dropped)
		if len(buf) > 0 {
			r.hot.addRecords(buf)
			r.use.hot.addRecords(buf)
			r.spare = buf[:0]
		}
	}
}

// Tick closes the current second at now: the counts since the previous
// tick (or, for the first tick, since the series were made) become the
// newest point, stamped now and covering the time since the previous tick
// (one second for the first). A tick at or before the previous one is
// ignored.
func (r *Recorder) Tick(now time.Time) {
	var samples []ServiceSample
	if r.sample != nil {
		samples = r.sample()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	dur := time.Second
	if !r.last.IsZero() {
		if !now.After(r.last) {
			return
		}
		dur = now.Sub(r.last)
	}
	r.last = now
	i := r.n % r.history
	r.ticks[i] = tick{end: now, dur: dur}
	r.sampleServices(i, samples)
	r.seriesMu.Lock()
	series := slices.Clone(r.series)
	r.seriesMu.Unlock()
	for _, s := range series {
		a, t, e := s.allowed.Load(), s.throttled.Load(), s.errored.Load()
		s.pAllowed[i], s.pThrottled[i], s.pError[i] = a-s.seenAllowed, t-s.seenThrottled, e-s.seenErrored
		s.seenAllowed, s.seenThrottled, s.seenErrored = a, t, e
	}
	// Count what the buffers hold, then close the summary.
	r.foldMu.Lock()
	r.fold()
	closed := r.hot
	r.slots[r.n%r.hotWindow] = hotSlot{entries: closed.entries(), floor: closed.floor(), dropped: r.curDropped, dur: dur}
	r.curDropped = 0
	r.hotBuf.reset()
	r.hot, r.hotBuf = r.hotBuf, closed
	r.foldUsage()
	r.tickUsage(now)
	r.foldMu.Unlock()
	r.n++
}

// Run ticks the recorder once a second with the wall clock, and counts
// buffered throttled keys into the current summary whenever a buffer is
// half full, until ctx ends; then it returns nil.
func (r *Recorder) Run(ctx context.Context) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			r.Tick(now)
		case <-r.wake:
			r.foldMu.Lock()
			r.fold()
			r.foldUsage()
			r.foldMu.Unlock()
		}
	}
}

// Decisions is a view of the per-second history, in columns: point i of
// every series covers (Times[i] - Durations[i], Times[i]].
type Decisions struct {
	Times     []time.Time     // end of each point, oldest first
	Durations []time.Duration // how long each point covers (about 1 s)
	Series    []SeriesPoints
}

// SeriesPoints are one series' counts, aligned with Decisions.Times.
type SeriesPoints struct {
	Service, Category string
	Allowed           []uint64
	Throttled         []uint64
	Errors            []uint64
}

// Decisions returns the points that end after since (all kept points for
// the zero time), oldest first.
func (r *Recorder) Decisions(since time.Time) Decisions {
	r.mu.Lock()
	defer r.mu.Unlock()
	var d Decisions
	first := max(0, r.n-r.history)
	for j := first; j < r.n; j++ {
		if tk := r.ticks[j%r.history]; tk.end.After(since) {
			first = j
			break
		}
		first = j + 1
	}
	for j := first; j < r.n; j++ {
		tk := r.ticks[j%r.history]
		d.Times = append(d.Times, tk.end)
		d.Durations = append(d.Durations, tk.dur)
	}
	r.seriesMu.Lock()
	series := slices.Clone(r.series)
	r.seriesMu.Unlock()
	for _, s := range series {
		sp := SeriesPoints{Service: s.service, Category: s.category,
			Allowed: []uint64{}, Throttled: []uint64{}, Errors: []uint64{}}
		for j := first; j < r.n; j++ {
			i := j % r.history
			sp.Allowed = append(sp.Allowed, s.pAllowed[i])
			sp.Throttled = append(sp.Throttled, s.pThrottled[i])
			sp.Errors = append(sp.Errors, s.pError[i])
		}
		d.Series = append(d.Series, sp)
	}
	return d
}

// HotKey is one of the keys throttled most.
type HotKey struct {
	Key quota.Key
	// Throttled is the estimated number of throttled requests of the key
	// over the window; the true number lies in
	// [Throttled-ErrorBound, Throttled].
	Throttled  uint64
	ErrorBound uint64
	// PerSecond is Throttled divided by the window's length.
	PerSecond float64
}

// Hot returns up to n keys throttled most over the closed seconds of the
// last HotWindow ticks, most throttled first (ties by key), the length of
// time they cover, and how many throttles of that time no summary counted
// (see Throttled). A dropped throttle may have been any key's, so each
// key's Throttled and ErrorBound include them.
func (r *Recorder) Hot(n int) (keys []HotKey, window time.Duration, dropped uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	type agg struct{ count, err, presentFloors uint64 }
	sum := map[quota.Key]*agg{}
	var floors uint64 // sum of every slot's floor: the most an absent key got
	slots := min(r.n, r.hotWindow)
	for j := r.n - slots; j < r.n; j++ {
		sl := &r.slots[j%r.hotWindow]
		window += sl.dur
		floors += sl.floor
		dropped += sl.dropped
		for _, e := range sl.entries {
			a := sum[e.key]
			if a == nil {
				a = &agg{}
				sum[e.key] = a
			}
			a.count += e.count
			a.err += e.err
			a.presentFloors += sl.floor
		}
	}
	// A key absent from a full slot was throttled there at most that
	// slot's floor times, which its estimate must include to stay an upper
	// bound; so must every dropped throttle.
	out := make([]HotKey, 0, len(sum))
	for k, a := range sum {
		extra := floors - a.presentFloors + dropped
		out = append(out, HotKey{Key: k, Throttled: a.count + extra, ErrorBound: a.err + extra})
	}
	slices.SortFunc(out, func(a, b HotKey) int {
		if c := cmp.Compare(b.Throttled, a.Throttled); c != 0 {
			return c
		}
		return cmp.Compare(a.Key.String(), b.Key.String())
	})
	out = out[:min(max(n, 0), len(out))]
	if window > 0 {
		for i := range out {
			out[i].PerSecond = float64(out[i].Throttled) / window.Seconds()
		}
	}
	return out, window, dropped
}
