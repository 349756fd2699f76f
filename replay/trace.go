package replay

// This file keeps the calls as they were played — bucket and instant, in
// play order — in an unlinked temporary file, so that the search for the
// smallest admitting limits (limits.go) can play them again, as often as
// it needs, without reading and parsing the logs again (which may be
// stdin, gzipped, or gone) and without holding them in memory.
//
// A call is two or three unsigned varints: bucket<<3 | flags<<1 |
// newInstant (flags: traceThrottled, traceToken), then,
// when its instant differs from the previous call's, the nanoseconds
// since it, then who made it (the caller's interned principal, user agent,
// source address and action, who.go). CloudTrail records times to the
// second, so most calls take a few bytes.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// traceWriter writes the played calls to a temporary file.
type traceWriter struct {
	f    *os.File
	w    *bufio.Writer
	last int64
	n    int64
	err  error
	buf  [3 * binary.MaxVarintLen64]byte
}

// newTrace creates the trace's file in dir (os.TempDir when empty) and
// unlinks it at once: it is gone when the replay ends, however it ends.
func newTrace(dir string) (*traceWriter, error) {
	f, err := os.CreateTemp(dir, "tollgate-replay-*.trace")
	if err != nil {
		return nil, fmt.Errorf("the trace of played calls: %w", err)
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("the trace of played calls: %w", err)
	}
	return &traceWriter{f: f, w: bufio.NewWriterSize(f, 1<<20)}, nil
}

// The flags of a call in the trace.
const (
	// traceThrottled marks a call throttled without retries, as the
	// replay decided it (all or none for a call of several buckets).
	traceThrottled = 1 << iota
	// traceToken marks a further token of the call before it, on the same
	// bucket: a RunTask's second task, and so on.
	traceToken
)

// add writes one call of bucket b at instant at, which is not before the
// previous call's, made by caller, with flags.
func (t *traceWriter) add(b int32, at int64, caller uint64, flags uint8) {
	if t.err != nil {
		return
	}
	flag := uint64(0)
	if t.n == 0 || at != t.last {
		flag = 1
	}
	k := binary.PutUvarint(t.buf[:], uint64(b)<<3|uint64(flags)<<1|flag)
	if flag == 1 {
		k += binary.PutUvarint(t.buf[k:], uint64(at-t.last))
		t.last = at
	}
	k += binary.PutUvarint(t.buf[k:], caller)
	if _, err := t.w.Write(t.buf[:k]); err != nil {
		t.err = fmt.Errorf("writing the trace of played calls: %w", err)
	}
	t.n++
}

// close closes the file.
func (t *traceWriter) close() { t.f.Close() }

// play calls f with every call written, in order, as often as it is
// called; the writes must be over.
func (t *traceWriter) play(f func(b int32, at int64, caller uint64, flags uint8)) error {
	if t.err != nil {
		return t.err
	}
	if err := t.w.Flush(); err != nil {
		t.err = fmt.Errorf("writing the trace of played calls: %w", err)
		return t.err
	}
	if _, err := t.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("reading the trace of played calls: %w", err)
	}
	const maxCall = 3 * binary.MaxVarintLen64
	buf := make([]byte, 1<<20)
	var lo, hi int // the unread bytes are buf[lo:hi]
	eof := false
	var at int64
	for i := int64(0); i < t.n; i++ {
		if hi-lo < maxCall && !eof {
			hi = copy(buf, buf[lo:hi])
			lo = 0
			for hi < maxCall && !eof {
				n, err := t.f.Read(buf[hi:])
				hi += n
				if err == io.EOF {
					eof = true
				} else if err != nil {
					return fmt.Errorf("reading the trace of played calls: %w", err)
				}
			}
		}
		v, k := binary.Uvarint(buf[lo:hi])
		if k <= 0 {
			return errors.New("reading the trace of played calls: it is cut short")
		}
		lo += k
		if v&1 == 1 {
			d, k := binary.Uvarint(buf[lo:hi])
			if k <= 0 {
				return errors.New("reading the trace of played calls: it is cut short")
			}
			lo += k
			at += int64(d)
		}
		c, k := binary.Uvarint(buf[lo:hi])
		if k <= 0 {
			return errors.New("reading the trace of played calls: it is cut short")
		}
		lo += k
		f(int32(v>>3), at, c, uint8(v>>1&3))
	}
	return nil
}
