package node

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/logtest"
)

// TestBucketCheckpointSurvivesAGracefulRestart is issue 37's "a bucket
// drained before a graceful restart is still drained after it": the node
// writes its buckets in debt when Run stops, and the next node on the
// same file reads them at New. A corrupt file is refused at start, naming
// the file and what to do; Redis with a checkpoint is refused.
func TestBucketCheckpointSurvivesAGracefulRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "buckets")
	ctx := context.Background()
	hourly := bucket.MustLimit(5, 1.0/3600)
	logs := &logtest.Buffer{}
	a := newTestNode(t, logs, Options{BucketCheckpoint: path})
	stop := run(t, a, logs)
	for range 5 {
		if d, _ := a.sweep.Take(ctx, "drained", hourly, 1); !d.Allowed {
			t.Fatal("a fresh bucket denied")
		}
	}
	stop()
	if !strings.Contains(logs.String(), "bucket checkpoint written") {
		t.Fatalf("no checkpoint written at shutdown:\n%s", logs.String())
	}
	b := newTestNode(t, &logtest.Buffer{}, Options{BucketCheckpoint: path})
	if d, _ := b.sweep.Take(ctx, "drained", hourly, 1); d.Allowed {
		t.Fatalf("after a graceful restart the drained bucket admitted: %+v", d)
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(path, data[:len(data)-1], 0o644)
	_, err = New(ctx, Options{Listen: "127.0.0.1:0", BucketCheckpoint: path})
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "move the file aside") {
		t.Fatalf("New with a truncated checkpoint: %v", err)
	}
	_, err = New(ctx, Options{Listen: "127.0.0.1:0", BucketCheckpoint: path, Store: config.Store{URL: "redis://127.0.0.1:1"}})
	if err == nil || !strings.Contains(err.Error(), "a checkpoint is for the memory store") {
		t.Fatalf("New with Redis and a checkpoint: %v", err)
	}
}
