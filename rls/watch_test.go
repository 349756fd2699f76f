package rls

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A Kubernetes ConfigMap update (a new dot directory, the "..data" link
// swapped to it by a rename, the old directory removed) is reported once,
// after the debounce, without a signal; so is a plain write.
func TestWatchConfigMapSwap(t *testing.T) {
	t.Parallel() // its own directory and watcher
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(filepath.Join(dir, "..2026_01"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "..2026_01", "config.yaml"), []byte("domain: a\n"), 0o644))
	must(os.Symlink("..2026_01", filepath.Join(dir, "..data")))
	must(os.Symlink("..data/config.yaml", filepath.Join(dir, "config.yaml")))
	must(os.Mkdir(filepath.Join(dir, "sub"), 0o755))

	changes := make(chan struct{}, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Watch(ctx, dir, WatchOptions{Debounce: 200 * time.Millisecond}, func() { changes <- struct{}{} })
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	}()
	wait := func(what string) {
		t.Helper()
		select {
		case <-changes:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: no change reported within 30 s", what)
		}
	}
	// The watch starts asynchronously: touch until it reports once.
	for ready := false; !ready; {
		must(os.WriteFile(filepath.Join(dir, "sub", "probe"), []byte("x"), 0o644))
		select {
		case <-changes:
			ready = true
		case <-time.After(2 * time.Second):
		}
	}
	os.Remove(filepath.Join(dir, "sub", "probe"))
	wait("removing a file")

	// The ConfigMap swap, as kubelet's AtomicWriter does it.
	must(os.Mkdir(filepath.Join(dir, "..2026_02"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "..2026_02", "config.yaml"), []byte("domain: b\n"), 0o644))
	must(os.Symlink("..2026_02", filepath.Join(dir, "..data_tmp")))
	must(os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	must(os.RemoveAll(filepath.Join(dir, "..2026_01")))
	wait("the ..data swap")
	cfg, err := Load(dir, LoadOptions{})
	if err != nil || cfg.Domains()[0] != "b" {
		t.Fatalf("after the swap: %v %v", cfg.Domains(), err)
	}
	// One swap is one report, not one per event.
	select {
	case <-changes:
		t.Error("the swap was reported twice")
	case <-time.After(time.Second):
	}
	// A new subdirectory is watched too.
	must(os.Mkdir(filepath.Join(dir, "sub", "deeper"), 0o755))
	wait("a new directory")
	must(os.WriteFile(filepath.Join(dir, "sub", "deeper", "x.yaml"), []byte("domain: c\n"), 0o644))
	wait("a file in the new directory")
}

// A change made after the caller's Load and before Watch set up its watch
// is reported (WatchOptions.Loaded); with the files as loaded, nothing is.
func TestWatchReportsAChangeBeforeItStarted(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(file, []byte("domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(dir, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	watch := func(t *testing.T) chan struct{} {
		changes := make(chan struct{}, 16)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- Watch(ctx, dir, WatchOptions{Debounce: 50 * time.Millisecond, Loaded: cfg.Digest()}, func() { changes <- struct{}{} })
		}()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Watch: %v", err)
			}
		})
		return changes
	}
	t.Run("unchanged", func(t *testing.T) {
		changes := watch(t)
		select {
		case <-changes:
			t.Error("reported a change with the files as loaded")
		case <-time.After(time.Second):
		}
	})
	t.Run("changed before the watch", func(t *testing.T) {
		if err := os.WriteFile(file, []byte("domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 2}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		changes := watch(t)
		select {
		case <-changes:
		case <-time.After(30 * time.Second):
			t.Error("a change made before the watch started was not reported")
		}
	})
}

// envoy ratelimit's documented layout: RUNTIME_ROOT=/srv/runtime_data/current,
// a symbolic link swapped to a new directory by renaming a new link over
// it. The config directory named through the link (the link itself, or
// RUNTIME_SUBDIRECTORY's directory below it) loads, and a swap is a change
// the watch reports, after which the new directory is the one watched.
// Before, Load refused the link ("not a regular file (a directory)") and
// the watch never saw the swap.
func TestWatchFollowsALinkSwap(t *testing.T) {
	for _, sub := range []string{"", "ratelimit/config"} {
		t.Run("current/"+sub, func(t *testing.T) {
			t.Parallel() // its own directory and watcher
			rt := t.TempDir()
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			for _, v := range []string{"v1", "v2"} {
				must(os.MkdirAll(filepath.Join(rt, v, sub), 0o755))
				must(os.WriteFile(filepath.Join(rt, v, sub, "config.yaml"), []byte("domain: "+v+"\n"), 0o644))
			}
			current := filepath.Join(rt, "current")
			must(os.Symlink("v1", current))
			dir := filepath.Join(current, sub)
			cfg, err := Load(dir, LoadOptions{})
			if err != nil || cfg.Domains()[0] != "v1" {
				t.Fatalf("Load through the link: %v %v", cfg, err)
			}
			if got, want := cfg.Files()[0], filepath.Join(dir, "config.yaml"); got != want {
				t.Errorf("file named %s, want %s (under the link)", got, want)
			}

			changes := make(chan struct{}, 16)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- Watch(ctx, dir, WatchOptions{Debounce: 100 * time.Millisecond}, func() { changes <- struct{}{} })
			}()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Watch: %v", err)
				}
			}()
			wait := func(what string) {
				t.Helper()
				select {
				case <-changes:
				case <-time.After(30 * time.Second):
					t.Fatalf("%s: no change reported within 30 s", what)
				}
			}
			quiet := func(what string) {
				t.Helper()
				select {
				case <-changes:
					t.Errorf("%s was reported as a change", what)
				case <-time.After(time.Second):
				}
			}
			// The watch starts asynchronously: touch until it reports once.
			probe := filepath.Join(rt, "v1", sub, "probe")
			for tries, ready := 0, false; !ready; tries++ {
				if tries == 15 {
					t.Fatal("a file written through the link was not reported within 30 s")
				}
				must(os.WriteFile(probe, []byte("x"), 0o644))
				select {
				case <-changes:
					ready = true
				case <-time.After(2 * time.Second):
				}
			}
			must(os.Remove(probe))
			wait("removing the probe")

			must(os.Mkdir(filepath.Join(rt, "v3"), 0o755))
			quiet("a new directory beside the link")

			must(os.Symlink("v2", current+".tmp"))
			must(os.Rename(current+".tmp", current))
			wait("the swap of current")
			cfg, err = Load(dir, LoadOptions{})
			if err != nil || cfg.Domains()[0] != "v2" {
				t.Fatalf("after the swap: %v %v", cfg, err)
			}
			must(os.WriteFile(filepath.Join(rt, "v2", sub, "more.yaml"), []byte("domain: more\n"), 0o644))
			wait("a file written in the link's new directory")
			must(os.WriteFile(filepath.Join(rt, "v1", sub, "old.yaml"), []byte("domain: old\n"), 0o644))
			quiet("a file written in the old directory")
		})
	}
}
