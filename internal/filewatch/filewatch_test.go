package filewatch_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/filewatch"
)

// TestReloadOnChangeAndLinkSwap: a write to the file, and a swap of the
// symbolic link it is reached through (a Kubernetes volume's "..data"),
// each lead to a reload.
func TestReloadOnChangeAndLinkSwap(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []string{"v1", "v2"} {
		if err := os.MkdirAll(filepath.Join(dir, v), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, v, "f"), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("v1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "f")
	if err := os.Symlink(filepath.Join("..data", "f"), file); err != nil {
		t.Fatal(err)
	}
	seen := make(chan string, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- filewatch.Watch{
			Name:     "test file",
			Files:    func() []string { return []string{file} },
			Reload:   func() { b, _ := os.ReadFile(file); seen <- string(b) },
			Debounce: 10 * time.Millisecond,
		}.Run(ctx)
	}()
	next := func(want string) {
		t.Helper()
		deadline := time.After(time.Minute) // a loaded machine: wide
		for {
			select {
			case got := <-seen:
				if got == want {
					return
				}
			case <-deadline:
				t.Fatalf("no reload reading %q", want)
			}
		}
	}
	next("v1") // the read at start
	if err := os.WriteFile(filepath.Join(dir, "v1", "f"), []byte("v1b"), 0o644); err != nil {
		t.Fatal(err)
	}
	next("v1b")
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink("v2", tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	next("v2")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
}

func Example() {
	dir, _ := os.MkdirTemp("", "filewatch")
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "credentials")
	_ = os.WriteFile(file, []byte("[a]\n"), 0o600)

	ctx, cancel := context.WithCancel(context.Background())
	w := filewatch.Watch{
		Name:     "credentials file",
		Files:    func() []string { return []string{file} },
		Reload:   func() { fmt.Println("read", filepath.Base(file)); cancel() },
		Debounce: 500 * time.Millisecond,
	}
	if err := w.Run(ctx); err != nil { // reads once at start, then on every change
		fmt.Println(err)
	}
	// Output: read credentials
}
