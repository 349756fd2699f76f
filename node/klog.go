package node

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"k8s.io/klog/v2"
)

// clientGoLogs is where client-go's klog lines (leader election,
// informers) go. klog's logger is process-wide and read without a lock by
// every informer and leader elector, so it is set once, to a handler that
// passes each record to the logger routeClientGoLogs was given last: a
// second node in the process (tests, an embedding program) moves the
// lines without racing with the first node's informers.
var clientGoLogs struct {
	once sync.Once
	to   atomic.Pointer[slog.Logger]
}

// routeClientGoLogs sends client-go's klog lines into log, with
// component=client-go, rather than as plain "I1201 …" lines beside
// tollgate's own.
func routeClientGoLogs(log *slog.Logger) {
	clientGoLogs.to.Store(log.With("component", "client-go"))
	clientGoLogs.once.Do(func() { klog.SetSlogLogger(slog.New(forwardHandler{})) })
}

// forwardHandler hands each record to the handler of clientGoLogs' logger
// at the time, with the attributes and groups it was given.
type forwardHandler struct {
	with []func(slog.Handler) slog.Handler
}

func (h forwardHandler) target() slog.Handler {
	t := clientGoLogs.to.Load().Handler()
	for _, w := range h.with {
		t = w(t)
	}
	return t
}

func (h forwardHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return clientGoLogs.to.Load().Handler().Enabled(ctx, l)
}

func (h forwardHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.target().Handle(ctx, r)
}

func (h forwardHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return forwardHandler{with: append(slices.Clip(h.with), func(t slog.Handler) slog.Handler { return t.WithAttrs(as) })}
}

func (h forwardHandler) WithGroup(name string) slog.Handler {
	return forwardHandler{with: append(slices.Clip(h.with), func(t slog.Handler) slog.Handler { return t.WithGroup(name) })}
}
