// Package logtest captures what a logger writes from many goroutines, for
// tests that read the log back. It owns one type, [Buffer]; it never
// parses log lines and never writes anywhere but memory.
package logtest

import (
	"bytes"
	"sync"
)

// Buffer is an [io.Writer] that is safe for concurrent use: servers under
// test log from their own goroutines while the test reads [Buffer.String].
// The zero Buffer is empty and ready to use. A Buffer must not be copied
// after first use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer; it never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
