package memory

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/limiter/limitertest"
)

// TestCheckpointRestoresBucketsInDebt: a store drained and checkpointed
// hands a new store (a restarted node) the same debt: no fresh burst; a
// bucket full again by then is not restored, and the file holds only
// buckets in debt.
func TestCheckpointRestoresBucketsInDebt(t *testing.T) {
	clock := limitertest.NewClock()
	ctx := context.Background()
	limit := bucket.MustLimit(10, 1)
	a := New(Options{Now: clock.Now})
	for range 10 {
		a.Take(ctx, "drained", limit, 1)
	}
	a.Take(ctx, "one", limit, 1)
	a.Take(ctx, "full", limit, 0)
	path := filepath.Join(t.TempDir(), "buckets")
	n, err := a.SaveCheckpoint(path)
	if err != nil || n != 2 {
		t.Fatalf("SaveCheckpoint: %d, %v; want 2 buckets in debt", n, err)
	}
	clock.Advance(1500 * time.Millisecond) // "one" is full again; "drained" has 1 token
	b := New(Options{Now: clock.Now})
	if n, err := b.LoadCheckpoint(path); err != nil || n != 1 {
		t.Fatalf("LoadCheckpoint: %d, %v; want 1 bucket still in debt", n, err)
	}
	for i, want := range []bool{true, false} {
		if d, _ := b.Take(ctx, "drained", limit, 1); d.Allowed != want {
			t.Fatalf("take %d of the drained bucket after the restart: %+v, want allowed %v", i, d, want)
		}
	}
	if d, _ := b.Take(ctx, "one", limit, 1); !d.Allowed || d.Remaining != 9 {
		t.Fatalf("the refilled bucket: %+v, want 9 left", d)
	}
	if n, err := b.LoadCheckpoint(filepath.Join(t.TempDir(), "none")); n != 0 || err != nil {
		t.Fatalf("a missing checkpoint: %d, %v; want a first start", n, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("the directory holds %d files after a save, want the checkpoint alone", len(entries))
	}
}

// TestCheckpointRefusesBadFiles: a corrupt, truncated, foreign or newer
// checkpoint is refused with what is wrong, and restores nothing.
func TestCheckpointRefusesBadFiles(t *testing.T) {
	clock := limitertest.NewClock()
	a := New(Options{Now: clock.Now})
	a.Take(context.Background(), "k", bucket.MustLimit(10, 1), 5)
	var buf bytes.Buffer
	if _, err := a.WriteCheckpoint(&buf); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	flipped := bytes.Clone(good)
	flipped[len(checkpointMagic)+14] ^= 1
	newer := bytes.Clone(good)
	binary.BigEndian.PutUint32(newer[len(checkpointMagic):], CheckpointVersion+1)
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"corrupt":   {flipped, "checksum mismatch"},
		"truncated": {good[:len(good)-3], "checksum mismatch"},
		"empty":     {nil, "not a tollgate bucket checkpoint"},
		"foreign":   {[]byte("{\"buckets\": []}\n"), "not a tollgate bucket checkpoint"},
		"newer":     {newer, "version 2, from a newer tollgate (this one reads version 1)"},
	} {
		b := New(Options{Now: clock.Now})
		n, err := b.ReadCheckpoint(bytes.NewReader(tc.data))
		if !errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), tc.want) || n != 0 || b.Len() != 0 {
			t.Errorf("%s: %d restored, %v; want none and %q", name, n, err, tc.want)
		}
	}
}

// FuzzReadCheckpoint: no input panics the reader or restores anything
// from a file it refuses; a file it reads writes back the same buckets.
func FuzzReadCheckpoint(f *testing.F) {
	clock := limitertest.NewClock()
	a := New(Options{Now: clock.Now})
	a.Take(context.Background(), "k", bucket.MustLimit(10, 1), 5)
	var buf bytes.Buffer
	a.WriteCheckpoint(&buf)
	f.Add(buf.Bytes())
	f.Add([]byte(checkpointMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		b := New(Options{Now: clock.Now})
		n, err := b.ReadCheckpoint(bytes.NewReader(data))
		if err != nil && (n != 0 || b.Len() != 0) {
			t.Fatalf("refused (%v) yet restored %d", err, n)
		}
		if err == nil && b.Len() > n {
			t.Fatalf("restored %d, holds %d", n, b.Len())
		}
	})
}
