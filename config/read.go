package config

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
)

// MaxBytes bounds a config file when Limits.MaxBytes is 0; a larger one
// is refused, at start and on reload, before it is read whole.
const MaxBytes = 4 << 20

// ReadTimeout bounds the time reading a config file may take when
// Limits.Timeout is 0, so a reload from a FIFO nobody writes to, or from a
// hung mount, gives up.
const ReadTimeout = 10 * time.Second

// Limits bound one [ReadFile]. The zero value means MaxBytes and
// ReadTimeout.
type Limits struct {
	// MaxBytes is the largest file accepted; 0 means MaxBytes.
	MaxBytes int64
	// Timeout bounds the whole read; 0 means ReadTimeout.
	Timeout time.Duration
}

// ReadFile reads the file at path, refusing one of more than
// lim.MaxBytes bytes and giving up after lim.Timeout or when ctx ends;
// what names the file in errors ("config", "--admin-token-file"). The
// file is opened non-blocking, so a FIFO without a writer does not hang
// the open, and a read from a FIFO or socket ends at the deadline; an
// endless file (/dev/zero) ends at the size bound. Every error matches
// [ErrInvalidConfig].
func ReadFile(ctx context.Context, what, path string, lim Limits) ([]byte, error) {
	limit, timeout := lim.MaxBytes, lim.Timeout
	if limit <= 0 {
		limit = MaxBytes
	}
	if timeout <= 0 {
		timeout = ReadTimeout
	}
	data, err := readFile(ctx, what, path, limit, timeout)
	if err != nil {
		return nil, readError{err}
	}
	return data, nil
}

// readError is an error of ReadFile: its text unchanged, matching
// ErrInvalidConfig.
type readError struct{ err error }

func (e readError) Error() string { return e.err.Error() }

// Unwrap returns the underlying error (an *os.PathError, say).
func (e readError) Unwrap() error { return e.err }

// Is reports whether target is ErrInvalidConfig.
func (e readError) Is(target error) bool { return target == ErrInvalidConfig }

func readFile(ctx context.Context, what, path string, limit int64, timeout time.Duration) ([]byte, error) {
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
