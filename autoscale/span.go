package autoscale

// This file records samples that cover a span of time rather than one
// engine second: a caller whose once-a-second measurement runs late.

import (
	"fmt"
	"math"
	"time"
)

// ObserveSpan records instance id's usage over the span [from, to):
// cpuCores of CPU and concurrency concurrent requests, each its average
// over the span. The usage is split over the engine seconds the span
// covers in proportion to its time in each, so a second covered by
// consecutive spans holds their time-weighted sum: a measurement taken
// 0.4 s late covers 1.4 s and fills its seconds by time, where one sample
// put into one second would read a constant load high there and low in
// the second the late tick skipped (a concurrency of 6, sampled 1 s ± up
// to 0.9 s apart, averaged 4.7 to 5.2).
//
// Spans of one instance are meant to follow each other ([t0, t1),
// [t1, t2), …): the part of a span before the end of the instance's
// previous one is dropped, so no usage counts twice, and a gap between
// spans reads as no usage. Seconds that have left the 10-minute window are
// skipped; a span that has left it entirely gives ErrStaleSample, an
// empty one records nothing. An engine's samples come either all from
// ObserveSpan or all from Observe (which replaces a second's sample rather
// than adding to it).
//
// The window averages end at the last complete second: the span's last
// second counts once the next span has filled it. Adaptive concurrency
// throttling reads the span's CPU as Observe reads a sample's, once per
// engine second, for the second holding the span's end.
func (e *Engine) ObserveSpan(from, to time.Time, id InstanceID, cpuCores, concurrency float64) error {
	in, ok := e.instances[id]
	if !ok {
		return fmt.Errorf("observe instance %d: %w", id, ErrUnknownInstance)
	}
	for _, t := range [2]time.Time{from, to} {
		if err := e.checkSample(id, t, cpuCores, concurrency); err != nil {
			return err
		}
	}
	if to.Before(from) {
		return fmt.Errorf("observe instance %d: span from %v ends before it starts, at %v: %w", id, from, to, ErrInvalidSample)
	}
	e.clock(to)
	if in.spanned && from.Before(in.spanEnd) {
		from = in.spanEnd
	}
	if !to.After(from) {
		return nil
	}
	// Offsets from the epoch: both are within 100 years of the engine's
	// time, so neither saturates.
	lo, hi := from.Sub(e.epoch), to.Sub(e.epoch)
	first, last := e.second(from), e.second(to.Add(-1))
	first = max(first, e.nowSec-span10m+1)
	cpu, conc := cpuCores*milli, concurrency*milli
	recorded := false
	for sec := first; sec <= last; sec++ {
		if !e.acceptsSecond(in, sec) {
			continue
		}
		start := time.Duration(sec) * time.Second
		part := float64(min(hi, start+time.Second)-max(lo, start)) / float64(time.Second)
		if in.win == nil {
			in.win = e.takeWindow()
		}
		v := pair{cpu: int64(math.Round(cpu * part)), conc: int64(math.Round(conc * part))}
		delta, _ := in.win.put(sec, v, false)
		e.svc.put(sec, delta, false)
		recorded = true
	}
	if !recorded {
		return fmt.Errorf("observe instance %d over [%v, %v): %w", id, from, to, ErrStaleSample)
	}
	in.spanned, in.spanEnd = true, to
	// The seconds before the one holding to are complete, as far as
	// this instance's spans go.
	e.markSampled(e.second(to) - 1)
	e.throttle(in, last, cpuCores, concurrency)
	return nil
}
