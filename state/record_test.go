package state_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/state"
)

// A stream written is read back record for record.
func TestStreamRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w, err := state.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	recs := []state.Record{{Table: "cloudmap", Key: "a/b\x00n:ns-1", Value: `{"id":"ns-1"}`}, {Table: "servicequotas", Key: "#seq", Value: "7"}}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	r, err := state.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range recs {
		got, err := r.Next()
		if err != nil || got != want {
			t.Fatalf("read %+v, %v; want %+v", got, err, want)
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the last record: %v, want io.EOF", err)
	}
}

// A stream of a newer schema, or without a header, is refused with the
// line named.
func TestStreamRefusals(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{``, "it is empty"},
		{`{"table":"t","key":"k","value":"v"}` + "\n", "line 1 is not its header"},
		{`{"format":"tollgate-state","version":2}` + "\n", "schema version 2"},
		{`{"format":"tollgate-state","version":1}` + "\n" + `{"table":"t","key":""}` + "\n", "line 2: a record needs a table and a key"},
		{`{"format":"tollgate-state","version":1}` + "\n" + `{"table":"t","key":"k","extra":1}` + "\n", "line 2"},
	} {
		r, err := state.NewReader(strings.NewReader(c.in))
		if err == nil {
			_, err = r.Next()
		}
		if !errors.Is(err, state.ErrBadStream) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v; want ErrBadStream saying %q", c.in, err, c.want)
		}
	}
}

// FuzzReader reads any stream: records or an error wrapping
// ErrBadStream, never a panic, each record with a table and a bounded key.
func FuzzReader(f *testing.F) {
	f.Add(`{"format":"tollgate-state","version":1}` + "\n" + `{"table":"t","key":"k","value":"v"}` + "\n")
	f.Add(`{"format":"tollgate-state","version":1}` + "\n" + `{"table":"t","key":"k","value":"v"}{}` + "\n")
	f.Add("{}\n{}\n")
	f.Fuzz(func(t *testing.T, in string) {
		r, err := state.NewReader(strings.NewReader(in))
		if err != nil {
			if !errors.Is(err, state.ErrBadStream) {
				t.Fatalf("NewReader: %v does not wrap ErrBadStream", err)
			}
			return
		}
		for {
			rec, err := r.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				if !errors.Is(err, state.ErrBadStream) {
					t.Fatalf("Next: %v does not wrap ErrBadStream", err)
				}
				return
			}
			if rec.Table == "" || rec.Key == "" || len(rec.Key) > state.MaxKeyBytes {
				t.Fatalf("record %+v", rec)
			}
		}
	})
}
