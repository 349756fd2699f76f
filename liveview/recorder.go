package liveview

import (
	"cmp"
	"context"
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
}

// Recorder records decisions; see the package documentation. It is safe
// for concurrent use.
type Recorder struct {
	history, hotWindow, hotCap int

	seriesMu sync.Mutex
	series   []*Series // in creation order
	byName   map[[2]string]*Series

	hotMu sync.Mutex
	hot   *spaceSaving // the current second's throttled keys

	mu     sync.Mutex // guards what Tick writes and the views read
	ticks  []tick     // ring of History ticks
	n      int        // ticks taken so far; the newest is ticks[(n-1)%History]
	last   time.Time  // the previous tick
	slots  []hotSlot  // ring of HotWindow closed summaries, aligned with ticks
	hotBuf *spaceSaving

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
	dur     time.Duration
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
	if opts.Services != nil {
		r.sample = opts.Services
		r.svc = make([][]ServiceSample, r.history)
	}
	r.hotBuf = newSpaceSaving(r.hotCap)
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
func (r *Recorder) Throttled(k quota.Key) {
	if r == nil {
		return
	}
	r.hotMu.Lock()
	r.hot.add(k, 1)
	r.hotMu.Unlock()
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
	// Swap in the spare summary, then copy the closed one out of the lock
	// the decision path takes.
	r.hotBuf.reset()
	r.hotMu.Lock()
	closed := r.hot
	r.hot = r.hotBuf
	r.hotMu.Unlock()
	r.hotBuf = closed
	r.slots[r.n%r.hotWindow] = hotSlot{entries: closed.entries(), floor: closed.floor(), dur: dur}
	r.n++
}

// Run ticks the recorder once a second with the wall clock until ctx ends,
// then returns nil.
func (r *Recorder) Run(ctx context.Context) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			r.Tick(now)
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
// last HotWindow ticks, most throttled first (ties by key), and the length
// of time they cover.
func (r *Recorder) Hot(n int) ([]HotKey, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	type agg struct{ count, err, presentFloors uint64 }
	sum := map[quota.Key]*agg{}
	var window time.Duration
	var floors uint64 // sum of every slot's floor: the most an absent key got
	slots := min(r.n, r.hotWindow)
	for j := r.n - slots; j < r.n; j++ {
		sl := &r.slots[j%r.hotWindow]
		window += sl.dur
		floors += sl.floor
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
	// bound.
	out := make([]HotKey, 0, len(sum))
	for k, a := range sum {
		absent := floors - a.presentFloors
		out = append(out, HotKey{Key: k, Throttled: a.count + absent, ErrorBound: a.err + absent})
	}
	slices.SortFunc(out, func(a, b HotKey) int {
		if c := cmp.Compare(b.Throttled, a.Throttled); c != 0 {
			return c
		}
		return cmp.Compare(a.Key.String(), b.Key.String())
	})
	out = out[:min(n, len(out))]
	if window > 0 {
		for i := range out {
			out[i].PerSecond = float64(out[i].Throttled) / window.Seconds()
		}
	}
	return out, window
}
