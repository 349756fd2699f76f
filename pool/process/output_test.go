package process

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// recorder is a slog.Handler keeping the records it gets.
type recorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec.Clone())
	return nil
}

// FuzzLogLines checks that every line of any output is logged once, whole
// when it fits in MaxLogLine and cut to MaxLogLine (truncated=true)
// otherwise.
func FuzzLogLines(f *testing.F) {
	f.Add([]byte("hello\nworld\n"), 0)
	f.Add([]byte("no newline at the end"), 0)
	f.Add([]byte("crlf\r\n\n\nempty lines\n"), 0)
	f.Add([]byte("long line follows\n"), MaxLogLine+10)
	f.Add([]byte("exactly\n"), MaxLogLine)
	f.Add([]byte(""), MaxLogLine-1)
	f.Fuzz(func(t *testing.T, data []byte, long int) {
		if long < 0 || long > 4*MaxLogLine {
			return
		}
		// Put a line of long bytes in the middle.
		in := append(append(append([]byte{}, data...), bytes.Repeat([]byte{'y'}, long)...), '\n')
		in = append(in, data...)
		rec := &recorder{}
		logLines(bytes.NewReader(in), slog.New(rec), "stdout", nil)

		var want []string
		rest := string(in)
		for rest != "" {
			line, tail, found := strings.Cut(rest, "\n")
			rest = tail
			if !found && line == "" {
				break
			}
			want = append(want, line)
		}
		if len(rec.recs) != len(want) {
			t.Fatalf("%d lines logged as %d records", len(want), len(rec.recs))
		}
		for k, r := range rec.recs {
			truncated := false
			r.Attrs(func(a slog.Attr) bool {
				if a.Key == "truncated" {
					truncated = a.Value.Bool()
				}
				return true
			})
			line := strings.TrimRight(want[k], "\r")
			switch {
			case len(want[k])+1 > MaxLogLine:
				// A line the reader's buffer cannot hold with its newline.
				if !truncated || len(r.Message) != MaxLogLine || !strings.HasPrefix(want[k], r.Message) {
					t.Fatalf("record %d: %d-byte line logged as %d bytes, truncated=%v", k, len(want[k]), len(r.Message), truncated)
				}
			case truncated || r.Message != line:
				t.Fatalf("record %d = %q (truncated=%v), want %q", k, r.Message, truncated, line)
			}
		}
	})
}
