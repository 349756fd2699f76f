package redis

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// SetClientLogger sends go-redis's own log lines (such as "connection
// pool: failed to dial after 5 attempts"), which go-redis otherwise writes
// to standard error as plain text, to log as warnings with the message
// "redis client", the go-redis text in the attribute "message" and the
// number of lines left out before it in "suppressed". At most one line is
// logged per interval (0 means 10 s, the store's default LogInterval): a
// Redis outage makes go-redis log on every failed dial.
//
// go-redis has one logger per process, so this applies to every client;
// call it once at start, before the first client is made.
func SetClientLogger(log *slog.Logger, interval time.Duration) {
	if interval <= 0 {
		interval = 10 * time.Second
	}
	goredis.SetLogger(&clientLog{log: log, every: interval})
}

// clientLog is a go-redis logger writing to a slog.Logger, at most one
// line per interval.
type clientLog struct {
	log     *slog.Logger
	every   time.Duration
	mu      sync.Mutex
	last    time.Time
	dropped int
}

// Printf implements go-redis's logging interface.
func (l *clientLog) Printf(ctx context.Context, format string, v ...any) {
	l.mu.Lock()
	now := time.Now()
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.dropped++
		l.mu.Unlock()
		return
	}
	l.last = now
	dropped := l.dropped
	l.dropped = 0
	l.mu.Unlock()
	if ctx == nil {
		ctx = context.Background()
	}
	l.log.LogAttrs(ctx, slog.LevelWarn, "redis client",
		slog.String("message", fmt.Sprintf(format, v...)),
		slog.Int("suppressed", dropped))
}
