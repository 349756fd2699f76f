package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// maxConfigBytes bounds a config file; a larger one is refused, at start
// and on reload, before it is read whole.
const maxConfigBytes = 4 << 20

// configReadTimeout bounds the time reading a config file may take, so a
// reload from a FIFO nobody writes to, or from a hung mount, gives up.
const configReadTimeout = 10 * time.Second

// loadConfig reads and parses the config file at path, or returns the
// built-in defaults when path is empty. The read is bounded by
// maxConfigBytes, by configReadTimeout and by ctx.
func loadConfig(ctx context.Context, path string) (*quota.Config, error) {
	if path == "" {
		return quota.Default(), nil
	}
	data, err := readBounded(ctx, "config", path, maxConfigBytes, configReadTimeout)
	if err != nil {
		return nil, err
	}
	return quota.Parse(path, data)
}

// readBounded reads the file at path, refusing one of more than limit
// bytes and giving up after timeout or when ctx ends; what names the file
// in errors. The file is opened
// non-blocking, so a FIFO without a writer does not hang the open, and a
// read from a FIFO or socket ends at the deadline.
func readBounded(ctx context.Context, what, path string, limit int64, timeout time.Duration) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if fi.Mode().IsRegular() && fi.Size() > limit {
		return nil, fmt.Errorf("%s %s is too large: %d bytes, more than the %s allowed", what, path, fi.Size(), byteSize(limit))
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Files that cannot be polled (regular files) ignore deadlines; their
	// reads do not wait on a writer.
	if deadline, ok := ctx.Deadline(); ok {
		_ = f.SetReadDeadline(deadline)
	}
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s %s is too large: more than the %s allowed", what, path, byteSize(limit))
	}
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if parent.Err() != nil {
				return nil, fmt.Errorf("%s %s: reading stopped: shutting down: %w", what, path, err)
			}
			return nil, fmt.Errorf("%s %s: reading took longer than %v: %w", what, path, timeout, err)
		}
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return data, nil
}

// byteSize formats n bytes for messages: "4 MiB", "4 KiB", "100 bytes".
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// warnConfig logs each of cfg's warnings (valid, but likely not meant).
func warnConfig(log *slog.Logger, cfg *quota.Config) {
	for _, w := range cfg.Warnings() {
		log.Warn("config warning", "warning", w.Error())
	}
}
