package logtest

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// TestBufferConcurrentWrites logs from many goroutines while reading:
// under -race a Buffer without its lock fails, and every line must arrive.
func TestBufferConcurrentWrites(t *testing.T) {
	var buf Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				log.Info("hello", "g", i)
				_ = buf.String()
			}
		}()
	}
	wg.Wait()
	if n := strings.Count(buf.String(), "msg=hello"); n != 8*50 {
		t.Errorf("got %d lines, want %d", n, 8*50)
	}
}
