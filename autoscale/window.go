package autoscale

// milli is the fixed-point scale of stored samples: 1.0 core or 1.0 request
// is stored as 1000. Integer sums never drift, however long a window slides.
const milli = 1000

// maxSample bounds one sample (in cores or requests) so that no sum over a
// 10-minute window of every instance can overflow an int64.
const maxSample = 1e6

// maxSpans is the largest number of averaging spans one window keeps.
const maxSpans = 3

// pair is one per-second bucket, or a running sum of buckets: CPU in
// millicores and concurrency in milli-requests.
type pair struct {
	cpu, conc int64
}

func (p *pair) add(q pair) { p.cpu += q.cpu; p.conc += q.conc }
func (p *pair) sub(q pair) { p.cpu -= q.cpu; p.conc -= q.conc }

// window is a sliding window of per-second buckets with a running sum for
// each of up to maxSpans spans (in seconds; the last span is the longest;
// the ring keeps one second more, so that an average can also end one
// second before the window end: see average).
//
// Second s lives in buf[s mod size]. Moving the window end from second t-1 to
// t subtracts, for every span k, the bucket of second t-span[k] from sums[k]
// and clears the bucket that second t reuses, so each second of elapsed time
// costs O(spans) and each sample O(spans): amortised O(1). A gap of a whole
// ring or more resets the window in one O(size) pass, which the gap itself
// pays for.
//
// Seconds from the first sample on for which nothing was written count as
// zero (nothing was used); seconds before the first sample are not part of
// the history, so an average divides by min(span, seconds since the first
// sample).
type window struct {
	buf     []pair
	spans   [maxSpans]int64
	nspans  int
	sums    [maxSpans]pair
	first   int64 // second of the first sample
	last    int64 // newest second the window has advanced to
	started bool
}

func newWindow(spans ...int64) *window {
	w := &window{nspans: len(spans)}
	copy(w.spans[:], spans)
	w.buf = make([]pair, spans[len(spans)-1]+1)
	return w
}

// reset empties w for reuse by a new instance.
func (w *window) reset() {
	clear(w.buf)
	w.sums = [maxSpans]pair{}
	w.started = false
	w.first, w.last = 0, 0
}

func (w *window) size() int64 { return int64(len(w.buf)) }

func (w *window) slot(sec int64) int {
	m := sec % w.size()
	if m < 0 {
		m += w.size()
	}
	return int(m)
}

// gap returns b-a for a <= b, exact for any two int64 values (the
// difference of two int64s always fits in a uint64).
func gap(a, b int64) uint64 { return uint64(b) - uint64(a) }

// advance moves the window end to sec (never backwards). A move of a whole
// ring or more, however large (the difference of any two int64 seconds is
// handled without overflow), resets the window in one pass.
func (w *window) advance(sec int64) {
	if !w.started || sec <= w.last {
		return
	}
	d := gap(w.last, sec)
	if d >= uint64(w.size()) {
		clear(w.buf)
		w.sums = [maxSpans]pair{}
		w.last = sec
		return
	}
	size := len(w.buf)
	cur := w.slot(w.last)
	for range d {
		if cur++; cur == size {
			cur = 0
		}
		for k := 0; k < w.nspans; k++ {
			i := cur - int(w.spans[k])
			if i < 0 {
				i += size
			}
			w.sums[k].sub(w.buf[i])
		}
		w.buf[cur] = pair{}
	}
	w.last = sec
}

// accepts reports whether put would store a sample for second sec: sec is
// not older than the longest span ending at the window end.
func (w *window) accepts(sec int64) bool {
	return !w.started || sec >= w.last || gap(sec, w.last) < uint64(w.spans[w.nspans-1])
}

// put stores v as the sample of second sec. With replace, v overwrites what
// the second held; otherwise it is added to it. It returns the change made
// to the bucket and false if sec has already left the longest span.
func (w *window) put(sec int64, v pair, replace bool) (pair, bool) {
	if !w.started {
		w.started = true
		w.first, w.last = sec, sec
	}
	w.advance(sec)
	if !w.accepts(sec) {
		return pair{}, false
	}
	if sec < w.first {
		w.first = sec
	}
	b := &w.buf[w.slot(sec)]
	delta := v
	if replace {
		delta.sub(*b)
	}
	b.add(delta)
	for k := 0; k < w.nspans; k++ {
		if gap(sec, w.last) < uint64(w.spans[k]) {
			w.sums[k].add(delta)
		}
	}
	return delta, true
}

// average returns the mean CPU (cores) and concurrency (requests) per
// second over span k ending at second end, that is over seconds
// end-span+1 … end; seconds before the first sample are not part of the
// history, so with none by end the average is zero. end may be the window
// end or later (the window advances to it), or one second before the
// window end (the engine's averages end at the last complete second while
// a sample for the current one may already be in); anything earlier is
// read as that.
func (w *window) average(k int, end int64) (cpu, conc float64) {
	if !w.started || end < w.first {
		return 0, 0
	}
	w.advance(end)
	sum := w.sums[k]
	if end < w.last {
		end = w.last - 1
		// The span ending one second earlier: without the window end's
		// second, with the one before the span. The ring keeps one
		// second more than the longest span, so that one is still there.
		sum.sub(w.buf[w.slot(w.last)])
		sum.add(w.buf[w.slot(w.last-w.spans[k])])
	}
	covered := w.spans[k]
	if g := gap(w.first, end); g < uint64(covered) {
		covered = int64(g) + 1
	}
	d := float64(covered) * milli
	return float64(sum.cpu) / d, float64(sum.conc) / d
}
