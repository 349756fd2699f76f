package main

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	data, err := readConfigFile(ctx, path, maxConfigBytes, configReadTimeout)
	if err != nil {
		return nil, err
	}
	return quota.Parse(path, data)
}

// readConfigFile reads the file at path, refusing one of more than limit
// bytes and giving up after timeout or when ctx ends. The file is opened
// non-blocking, so a FIFO without a writer does not hang the open, and a
// read from a FIFO or socket ends at the deadline.
func readConfigFile(ctx context.Context, path string, limit int64, timeout time.Duration) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	tooLarge := func(what string) error {
		return fmt.Errorf("config %s: %s, more than the %d MiB a config file may have", path, what, limit>>20)
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if fi.Mode().IsRegular() && fi.Size() > limit {
		return nil, tooLarge(fmt.Sprintf("%d bytes", fi.Size()))
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
		return nil, tooLarge("larger than that")
	}
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if parent.Err() != nil {
				return nil, fmt.Errorf("config %s: reading stopped: shutting down: %w", path, err)
			}
			return nil, fmt.Errorf("config %s: reading took longer than %v: %w", path, timeout, err)
		}
		return nil, fmt.Errorf("config: %w", err)
	}
	return data, nil
}
