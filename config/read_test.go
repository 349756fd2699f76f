package config

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadFileGivesUpOnAStalledFIFO: a read from a FIFO whose writer
// never writes ends at the time bound, or earlier when the context ends.
func TestReadFileGivesUpOnAStalledFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	w, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := ReadFile(context.Background(), "config", fifo, Limits{MaxBytes: 1 << 20, Timeout: 200 * time.Millisecond}); err == nil || !strings.Contains(err.Error(), "reading took longer than 200ms") {
		t.Errorf("stalled FIFO with a time bound: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	if _, err := ReadFile(ctx, "config", fifo, Limits{MaxBytes: 1 << 20, Timeout: time.Hour}); err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("stalled FIFO, context ended: %v", err)
	}
}

// TestReadFileBoundsSize: a file larger than the bound is refused before it
// is read, and an endless one (/dev/zero) at the bound; both errors match
// ErrInvalidConfig.
func TestReadFileBoundsSize(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(big, make([]byte, 2048), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{big, "/dev/zero"} {
		_, err := ReadFile(context.Background(), "config", path, Limits{MaxBytes: 1024})
		if err == nil || !strings.Contains(err.Error(), "is too large") || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v", path, err)
		}
	}
}
