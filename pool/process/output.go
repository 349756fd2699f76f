package process

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/tollgate/tollgate/bucket"
)

// Instance output is logged up to a rate per instance (stdout and stderr
// together): a line costs 1 + len/256 tokens of a bucket holding
// OutputBurst tokens and refilled at OutputPerSecond, so about 200 short
// lines or 50 KB a second, in bursts of ten times that. Beyond it lines are
// dropped and counted; the count is logged ("instance output dropped") at
// most once a second and when the stream ends, so an instance writing a
// gigabyte cannot turn tollgate's log into one.
const (
	OutputBurst     = 2000
	OutputPerSecond = 200
)

// outputLimit is one instance's output budget, shared by its streams.
type outputLimit struct {
	limit bucket.Limit
	log   *slog.Logger

	mu       sync.Mutex
	state    bucket.State
	dropped  int64 // since the last report
	total    int64 // dropped over the instance's life
	reported time.Time
}

func newOutputLimit(log *slog.Logger) *outputLimit {
	return &outputLimit{limit: bucket.MustLimit(OutputBurst, OutputPerSecond), log: log}
}

// allow reports whether a line of n bytes may be logged at now, and counts
// it as dropped when not; it reports the drops due (once a second).
func (o *outputLimit) allow(now time.Time, n int, stream string) bool {
	o.mu.Lock()
	cost := min(1+int64(n)/256, OutputBurst)
	var ok bool
	var d bucket.Decision
	o.state, d = o.limit.Take(o.state, now, cost)
	ok = d.Allowed
	if !ok {
		o.dropped++
		o.total++
	}
	report := o.dropped > 0 && now.Sub(o.reported) >= time.Second
	dropped, total := o.dropped, o.total
	if report {
		o.dropped, o.reported = 0, now
	}
	o.mu.Unlock()
	if report {
		o.log.Warn("instance output dropped", "stream", stream, "lines", dropped, "dropped_total", total,
			"limit", "about 200 lines or 50 KB a second per instance")
	}
	return ok
}

// flush reports drops not reported yet.
func (o *outputLimit) flush(stream string) {
	o.mu.Lock()
	dropped, total := o.dropped, o.total
	o.dropped = 0
	o.mu.Unlock()
	if dropped > 0 {
		o.log.Warn("instance output dropped", "stream", stream, "lines", dropped, "dropped_total", total,
			"limit", "about 200 lines or 50 KB a second per instance")
	}
}

// logLines logs each line read from r as one record of log, with
// stream=name, within lim (nil: no limit). A line longer than MaxLogLine
// is logged cut, with truncated=true, and the rest of it is skipped;
// memory stays bounded.
func logLines(r io.Reader, log *slog.Logger, name string, lim *outputLimit) {
	br := bufio.NewReaderSize(r, MaxLogLine)
	skipping := false // inside the rest of a line already logged cut
	if lim != nil {
		defer lim.flush(name)
	}
	emit := func(line []byte, attrs ...any) {
		if lim == nil || lim.allow(time.Now(), len(line), name) {
			log.Info(string(line), append([]any{"stream", name}, attrs...)...)
		}
	}
	for {
		line, err := br.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			if !skipping {
				emit(line, "truncated", true)
				skipping = true
			}
			continue
		case len(line) > 0 && !skipping:
			emit(bytes.TrimRight(line, "\r\n"))
		}
		skipping = false
		if err != nil {
			return
		}
	}
}
