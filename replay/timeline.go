package replay

// This file follows the calls of the most throttled buckets over time,
// for the report's figure: after the replay, from the trace of played
// calls, so that only the buckets shown keep a series, binned so that no
// series is longer than maxBins.

import (
	"cmp"
	"slices"
	"time"

	"github.com/tollgate/tollgate/bucket"
)

// timelineBuckets is how many buckets the figure follows; maxBins bounds
// each series.
const (
	timelineBuckets = 6
	maxBins         = 720
)

// binSteps are the bin widths a timeline may take; past the last, whole
// multiples of a day.
var binSteps = []time.Duration{
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
}

// binStep returns the smallest step of binSteps (or whole days) that
// covers span in at most maxBins bins.
func binStep(span time.Duration) time.Duration {
	for _, s := range binSteps {
		if span/s < maxBins {
			return s
		}
	}
	day := 24 * time.Hour
	return (span/(maxBins-1)/day + 1) * day
}

// Timeline is the calls of the most throttled buckets over time.
type Timeline struct {
	// Start is the start of the first bin: the first call played, to the
	// step; Step is each bin's width.
	Start time.Time     `json:"start"`
	Step  time.Duration `json:"step_ns"`
	// Buckets are the buckets with the most calls throttled (without
	// retries), the most first; only throttled ones, none when no call
	// was.
	Buckets []TimelineBucket `json:"buckets"`
}

// TimelineBucket is one bucket's calls, bin by bin.
type TimelineBucket struct {
	// Account, Region, Service and Category name the bucket.
	Account  string `json:"account"`
	Region   string `json:"region"`
	Service  string `json:"service"`
	Category string `json:"category"`
	// Burst and Rate are its limit.
	Burst int64   `json:"burst"`
	Rate  float64 `json:"rate"`
	// Calls and Throttled are the calls played and those throttled
	// without retries, per bin.
	Calls     []int64 `json:"calls"`
	Throttled []int64 `json:"throttled"`
}

// timeline plays the trace again for the most throttled buckets.
func timeline(tr *traceWriter, stats *statTable, limitOf func(b int32) bucket.Limit) (*Timeline, error) {
	if stats.len() == 0 {
		return nil, nil
	}
	var idx []int
	first, last := stats.at(0).firstAt, stats.at(0).batchAt
	for i := range stats.len() {
		s := stats.at(i)
		if s.throttled > 0 {
			idx = append(idx, i)
		}
		first, last = min(first, s.firstAt), max(last, s.batchAt)
	}
	if len(idx) == 0 {
		return nil, nil
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		return cmp.Or(cmp.Compare(stats.at(b).throttled, stats.at(a).throttled), cmp.Compare(stats.at(b).calls, stats.at(a).calls))
	})
	idx = idx[:min(len(idx), timelineBuckets)]
	step := int64(binStep(time.Duration(last - first)))
	start := first - ((first%step)+step)%step
	n := (last-start)/step + 1
	tl := &Timeline{Start: time.Unix(0, start).UTC(), Step: time.Duration(step)}
	slot := make([]int, stats.len()) // the bucket's place in tl.Buckets, or -1
	for i := range slot {
		slot[i] = -1
	}
	for j, i := range idx {
		key, lim := stats.key(i), limitOf(int32(i))
		slot[i] = j
		tl.Buckets = append(tl.Buckets, TimelineBucket{
			Account: key.Account, Region: key.Region, Service: key.Service, Category: key.Category,
			Burst: lim.Capacity(), Rate: lim.RefillPerSecond(),
			Calls: make([]int64, n), Throttled: make([]int64, n),
		})
	}
	err := tr.play(func(b int32, at int64, _ uint64, flags uint8) {
		j := slot[b]
		if j < 0 || flags&traceToken != 0 {
			return
		}
		k := (at - start) / step
		tl.Buckets[j].Calls[k]++
		if flags&traceThrottled != 0 {
			tl.Buckets[j].Throttled[k]++
		}
	})
	if err != nil {
		return nil, err
	}
	return tl, nil
}

// worstMinutes is how many minutes the report's table of the worst shows.
const worstMinutes = 10

// minuteRow is one bucket's minute: its calls and calls throttled.
type minuteRow struct {
	bucket           int
	at               time.Time
	calls, throttled int64
}

// worstMinutes returns the n bucket-minutes with the most calls throttled,
// the most first (then the earliest); none when a bin is longer than a
// minute.
func (tl *Timeline) worstMinutes(n int) []minuteRow {
	if tl.Step > time.Minute || time.Minute%tl.Step != 0 {
		return nil
	}
	var rows []minuteRow
	for i, b := range tl.Buckets {
		var cur *minuteRow
		for k := range b.Calls {
			at := tl.Start.Add(time.Duration(k) * tl.Step).Truncate(time.Minute)
			if cur == nil || !cur.at.Equal(at) {
				rows = append(rows, minuteRow{bucket: i, at: at})
				cur = &rows[len(rows)-1]
			}
			cur.calls += b.Calls[k]
			cur.throttled += b.Throttled[k]
		}
	}
	rows = slices.DeleteFunc(rows, func(r minuteRow) bool { return r.throttled == 0 })
	slices.SortStableFunc(rows, func(a, b minuteRow) int {
		return cmp.Or(cmp.Compare(b.throttled, a.throttled), a.at.Compare(b.at), cmp.Compare(a.bucket, b.bucket))
	})
	return rows[:min(len(rows), n)]
}
