package liveview

import (
	"cmp"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// Defaults of the utilisation options.
const (
	DefaultUsageWindow   = 60  // minutes: the last hour
	DefaultUsageCapacity = 256 // keys per minute, for each of throttles and peaks
)

// usageRecordExtra is what a usage record carries after the key's record:
// the tokens in use and the capacity, 8 bytes each.
const usageRecordExtra = 16

// usage is the per-minute half of a recorder: for each minute of the last
// Options.UsageWindow, the keys throttled most (a Space-Saving summary fed
// by the same buffers as the hottest keys) and the keys whose buckets were
// used most (a peakTable fed by Used). Everything here is guarded by the
// recorder's foldMu.
type usage struct {
	window, capacity int

	shards []pendingShard // usage records not yet in peaks
	spare  []byte

	minute     int64        // the current minute (Unix minutes); 0 before the first tick
	first      time.Time    // the first tick
	last       time.Time    // the last tick
	hot        *spaceSaving // this minute's throttles
	peaks      *peakTable   // this minute's peaks
	curDropped uint64       // this minute's dropped records, throttles and uses
	slots      []useSlot    // ring of closed minutes, by minute % window
}

// useSlot is one closed minute.
type useSlot struct {
	minute    int64 // Unix minutes; 0 for a slot never used
	hot       []hotEntry
	hotFloor  uint64
	peaks     []peakEntry
	peakFloor uint64
	dropped   uint64
}

func newUsage(window, capacity, shards int) usage {
	u := usage{window: window, capacity: capacity, hot: newSpaceSaving(capacity), peaks: newPeakTable(capacity),
		slots: make([]useSlot, window), shards: make([]pendingShard, shards), spare: make([]byte, 0, shardBuffer)}
	for i := range u.shards {
		u.shards[i].buf = make([]byte, 0, shardBuffer)
	}
	return u
}

// Used records an allowed decision of bucket k, after which used of its
// capacity tokens were in use (capacity minus the tokens remaining), for
// the utilisation view ([Recorder.Usage]). Nil-safe.
//
// A decision that cannot raise a peak of the current minute's table (the
// table is full and its least-used key used its bucket at least as much)
// costs one atomic load; any other is copied into a buffer, like a
// throttle (see Throttled), and counted by Run or the next Tick.
func (r *Recorder) Used(k quota.Key, used, capacity int64) {
	if r == nil {
		return
	}
	u := useOf(used, capacity)
	if u == 0 || u <= r.useFloor.Load() {
		return
	}
	sh := &r.use.shards[rand.Uint32()&r.shardMask]
	n := recordLen(k) + usageRecordExtra
	sh.mu.Lock()
	had := len(sh.buf)
	if had+n > cap(sh.buf) {
		sh.dropped++
		sh.mu.Unlock()
		return
	}
	sh.buf = appendRecord(sh.buf, k)
	sh.buf = binary.LittleEndian.AppendUint64(sh.buf, uint64(used))
	sh.buf = binary.LittleEndian.AppendUint64(sh.buf, uint64(capacity))
	sh.mu.Unlock()
	if had < shardBuffer/2 && had+n >= shardBuffer/2 {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// foldUsage moves the buffered usage records into the current minute's
// peaks and republishes the floor below which Used need not buffer; the
// caller holds foldMu.
func (r *Recorder) foldUsage() {
	u := &r.use
	for i := range u.shards {
		sh := &u.shards[i]
		sh.mu.Lock()
		buf, dropped := sh.buf, sh.dropped
		if len(buf) > 0 {
			sh.buf = u.spare
		}
		sh.dropped = 0
		sh.mu.Unlock()
		u.curDropped += dropped
		r.dropped.Add(dropped)
		for b := buf; len(b) > 0; {
			var rec []byte
			rec, b = nextRecord(b)
			used := int64(binary.LittleEndian.Uint64(b))
			capacity := int64(binary.LittleEndian.Uint64(b[8:]))
			b = b[usageRecordExtra:]
			u.peaks.add(rec, used, capacity)
		}
		if len(buf) > 0 {
			u.spare = buf[:0]
		}
	}
	r.useFloor.Store(u.peaks.floor())
}

// tickUsage closes the current minute if now is in a later one; the
// caller holds foldMu and has folded.
func (r *Recorder) tickUsage(now time.Time) {
	u := &r.use
	m := now.Unix() / 60
	u.last = now
	if u.minute == 0 {
		u.minute, u.first = m, now
		return
	}
	if m <= u.minute {
		return
	}
	u.slots[u.minute%int64(u.window)] = useSlot{minute: u.minute, hot: u.hot.entries(), hotFloor: u.hot.floor(),
		peaks: u.peaks.entries(), peakFloor: u.peaks.floor(), dropped: u.curDropped}
	u.hot.reset()
	u.peaks.reset()
	u.curDropped = 0
	u.minute = m
	r.useFloor.Store(0)
}

// KeyUsage is how close one bucket ran to its limit over the window.
type KeyUsage struct {
	Key quota.Key
	// Throttled is the estimated number of the bucket's throttled
	// decisions; the true number lies in [Throttled-ErrorBound,
	// Throttled].
	Throttled  uint64
	ErrorBound uint64
	// PeakUsed is the most tokens the bucket had in use after an allowed
	// decision (its capacity minus the tokens remaining), and Capacity
	// its capacity then; Peak is their ratio, from 0 to 1. A bucket that
	// was throttled ran out: read Throttled beside it.
	PeakUsed, Capacity int64
	Peak               float64
}

// UsageView is the utilisation over the last Options.UsageWindow minutes.
type UsageView struct {
	Keys []KeyUsage
	// Window is the time the view covers, up to the last tick.
	Window time.Duration
	// PeakFloor is the most any bucket may have been used in a minute
	// where the view does not list it (that minute's table was full of
	// buckets used more): a bucket's Peak is exact when it is above
	// PeakFloor, and a bucket not listed peaked at most at PeakFloor.
	PeakFloor float64
	// Dropped counts the window's throttles and uses no summary counted
	// (their buffers were full); each Throttled and ErrorBound include
	// the throttles among them.
	Dropped uint64
}

// Usage returns the buckets match accepts (all for nil) that were
// throttled or used over the last Options.UsageWindow minutes, up to the
// last tick, including the current minute (before the first tick, all
// there is, with a Window of 0): most throttled first, then
// most used, then by key; at most n of them (all for n <= 0).
func (r *Recorder) Usage(n int, match func(quota.Key) bool) UsageView {
	r.foldMu.Lock()
	defer r.foldMu.Unlock()
	r.fold()
	r.foldUsage()
	u := &r.use
	var view UsageView
	cur := useSlot{minute: u.minute, hot: u.hot.entries(), hotFloor: u.hot.floor(),
		peaks: u.peaks.entries(), peakFloor: u.peaks.floor(), dropped: u.curDropped}
	slots := []*useSlot{&cur}
	oldest := u.minute - int64(u.window) + 1
	for i := range u.slots { // none before the first tick
		if s := &u.slots[i]; s.minute >= oldest && s.minute < u.minute {
			slots = append(slots, s)
		}
	}
	type agg struct {
		KeyUsage
		presentFloors uint64
	}
	sum := map[quota.Key]*agg{}
	get := func(k quota.Key) *agg {
		a := sum[k]
		if a == nil {
			a = &agg{KeyUsage: KeyUsage{Key: k}}
			sum[k] = a
		}
		return a
	}
	var floors, peakFloor uint64
	for _, s := range slots {
		floors += s.hotFloor
		view.Dropped += s.dropped
		peakFloor = max(peakFloor, s.peakFloor)
		for _, e := range s.hot {
			if match != nil && !match(e.key) {
				continue
			}
			a := get(e.key)
			a.Throttled += e.count
			a.ErrorBound += e.err
			a.presentFloors += s.hotFloor
		}
		for _, e := range s.peaks {
			k := decodeRecord([]byte(e.rec))
			if match != nil && !match(k) {
				continue
			}
			a := get(k)
			if p := useOf(e.used, e.capacity); p > useOf(a.PeakUsed, a.Capacity) {
				a.PeakUsed, a.Capacity = e.used, e.capacity
			}
		}
	}
	view.Keys = make([]KeyUsage, 0, len(sum))
	for _, a := range sum {
		// A key absent from a full summary was throttled there at most
		// that summary's floor times; a dropped throttle may be anyone's.
		extra := floors - a.presentFloors + view.Dropped
		a.Throttled += extra
		a.ErrorBound += extra
		if a.Capacity > 0 {
			a.Peak = float64(a.PeakUsed) / float64(a.Capacity)
		}
		view.Keys = append(view.Keys, a.KeyUsage)
	}
	slices.SortFunc(view.Keys, func(a, b KeyUsage) int {
		return cmp.Or(cmp.Compare(b.Throttled, a.Throttled), cmp.Compare(b.Peak, a.Peak), cmp.Compare(a.Key.String(), b.Key.String()))
	})
	if n > 0 && len(view.Keys) > n {
		view.Keys = view.Keys[:n]
	}
	view.PeakFloor = math.Ceil(float64(peakFloor)/peakScale*1e4) / 1e4 // rounded up to 0.01%
	start := time.Unix(oldest*60, 0)
	if start.Before(u.first) {
		start = u.first
	}
	if u.minute != 0 && u.last.After(start) {
		view.Window = u.last.Sub(start)
	}
	return view
}
