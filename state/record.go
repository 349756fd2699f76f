package state

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Record is one piece of durable state: Value under Key in Table.
type Record struct {
	Table string `json:"table"`
	Key   string `json:"key"`
	Value string `json:"value"`
}

// RevisionsTable is the table of the autoscaled services' revisions:
// one record a service, its key the service's name, its value the JSON
// of pool.SavedRevisions (written by package node for package pool).
const RevisionsTable = "revisions"

// Limits of a record stream, so that reading one is bounded in memory.
const (
	// MaxLineBytes bounds one line of a stream (a record and its JSON).
	MaxLineBytes = 4 << 20
	// MaxKeyBytes bounds a record's key.
	MaxKeyBytes = 4 << 10
)

// Header is the first line of a stream: what wrote it and the schema
// version of its records.
type Header struct {
	Format  string `json:"format"` // always HeaderFormat
	Version int    `json:"version"`
}

// HeaderFormat names a stream of tollgate state records.
const HeaderFormat = "tollgate-state"

// SchemaVersion is the version of the records this tollgate writes and
// reads: a store or a stream of a higher version is refused.
const SchemaVersion = 1

// ErrBadStream is wrapped by the errors of Reader for a stream that is
// not one of records this tollgate reads.
var ErrBadStream = errors.New("state: not a tollgate state stream")

// Writer writes a record stream.
type Writer struct {
	w   *bufio.Writer
	enc *json.Encoder
}

// NewWriter writes the stream's header to w and returns its Writer; call
// Flush at the end.
func NewWriter(w io.Writer) (*Writer, error) {
	bw := bufio.NewWriter(w)
	sw := &Writer{w: bw, enc: json.NewEncoder(bw)}
	sw.enc.SetEscapeHTML(false)
	if err := sw.enc.Encode(Header{Format: HeaderFormat, Version: SchemaVersion}); err != nil {
		return nil, fmt.Errorf("state: writing the header: %w", err)
	}
	return sw, nil
}

// Write writes one record.
func (w *Writer) Write(r Record) error {
	if err := w.enc.Encode(r); err != nil {
		return fmt.Errorf("state: writing a record: %w", err)
	}
	return nil
}

// Flush writes what is buffered.
func (w *Writer) Flush() error {
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("state: writing: %w", err)
	}
	return nil
}

// Reader reads a record stream.
type Reader struct {
	sc   *bufio.Scanner
	line int
}

// NewReader reads and checks the stream's header; the error wraps
// ErrBadStream for a stream without a header this tollgate reads.
func NewReader(r io.Reader) (*Reader, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes)
	sr := &Reader{sc: sc}
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%w: line 1: %w", ErrBadStream, err)
		}
		return nil, fmt.Errorf("%w: it is empty (the first line is a header, %s)", ErrBadStream, headerExample())
	}
	sr.line = 1
	var h Header
	if err := strictDecode(sc.Bytes(), &h); err != nil || h.Format != HeaderFormat {
		return nil, fmt.Errorf("%w: line 1 is not its header (want %s)", ErrBadStream, headerExample())
	}
	if h.Version > SchemaVersion || h.Version < 1 {
		return nil, fmt.Errorf("%w: line 1: schema version %d; this tollgate reads version %d (a newer tollgate wrote it: import it with that one)", ErrBadStream, h.Version, SchemaVersion)
	}
	return sr, nil
}

func headerExample() string {
	b, _ := json.Marshal(Header{Format: HeaderFormat, Version: SchemaVersion})
	return string(b)
}

// Next returns the next record; io.EOF at the end of the stream. A line
// that is not a record is an error naming the line, wrapping ErrBadStream.
func (r *Reader) Next() (Record, error) {
	if !r.sc.Scan() {
		if err := r.sc.Err(); err != nil {
			return Record{}, fmt.Errorf("%w: line %d: %w", ErrBadStream, r.line+1, err)
		}
		return Record{}, io.EOF
	}
	r.line++
	var rec Record
	if err := strictDecode(r.sc.Bytes(), &rec); err != nil {
		return Record{}, fmt.Errorf("%w: line %d: %w", ErrBadStream, r.line, err)
	}
	switch {
	case rec.Table == "" || rec.Key == "":
		return Record{}, fmt.Errorf("%w: line %d: a record needs a table and a key", ErrBadStream, r.line)
	case len(rec.Key) > MaxKeyBytes:
		return Record{}, fmt.Errorf("%w: line %d: a key of %d bytes (at most %d)", ErrBadStream, r.line, len(rec.Key), MaxKeyBytes)
	case strings.ContainsRune(rec.Table, 0):
		return Record{}, fmt.Errorf("%w: line %d: a table name with a NUL byte", ErrBadStream, r.line)
	}
	return rec, nil
}

// Line is the number of the line Next read last.
func (r *Reader) Line() int { return r.line }

func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value on the line")
	}
	return nil
}
