package rls

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// DefaultDebounce is how long [Watch] waits after the last change before it
// reports, when WatchOptions.Debounce is 0: a ConfigMap update or an editor's
// save is several events within milliseconds.
const DefaultDebounce = 500 * time.Millisecond

// WatchOptions tune [Watch]. The zero value works.
type WatchOptions struct {
	// Debounce is the quiet time after the last change before Changed
	// is called; 0 means DefaultDebounce.
	Debounce time.Duration
	// Logger receives the watch's problems; nil discards them.
	Logger *slog.Logger
	// Loaded is the Config.Digest of what the caller loaded before
	// calling Watch. When set, Watch reads the files once its watch is
	// set up and calls changed if they differ, so that a change made
	// between the caller's load and the watch is not missed.
	Loaded string
}

// Watch watches the config directory dir (or the file dir names) with
// fsnotify until ctx ends, and calls changed once the files have been
// quiet for the debounce time after any change: a file written, created,
// removed or renamed, including the "..data" symbolic link a Kubernetes
// ConfigMap volume swaps on an update. Subdirectories are watched too
// (at most MaxFiles of them). changed should queue the same bounded,
// all-or-nothing reload as SIGHUP; Watch never reads the files itself.
// It returns nil when ctx ends, or an error if the watch cannot start.
func Watch(ctx context.Context, dir string, opts WatchOptions, changed func()) error {
	debounce := opts.Debounce
	if debounce <= 0 {
		debounce = DefaultDebounce
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching %s: %w", dir, err)
	}
	defer w.Close()
	info, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("watching %s: %w", dir, err)
	}
	if !info.IsDir() {
		if err := w.Add(filepath.Dir(dir)); err != nil {
			return fmt.Errorf("watching %s: %w", dir, err)
		}
	} else if err := addTree(w, dir); err != nil {
		return fmt.Errorf("watching %s: %w", dir, err)
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	if opts.Loaded != "" {
		// Every change from here on is an event; one made before it
		// shows as a different digest.
		if d, err := DirDigest(ctx, dir); err != nil || d != opts.Loaded {
			timer.Reset(debounce)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if ev.Op == fsnotify.Chmod {
				continue
			}
			if ev.Op&fsnotify.Create != 0 && info.IsDir() {
				if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() && !strings.HasPrefix(filepath.Base(ev.Name), ".") {
					if err := addTree(w, ev.Name); err != nil {
						log.Warn("envoy ratelimit config: cannot watch a new directory", "dir", ev.Name, "error", err)
					}
				}
			}
			timer.Reset(debounce)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			log.Warn("envoy ratelimit config: watch error; reloading to be safe", "dir", dir, "error", err)
			timer.Reset(debounce)
		case <-timer.C:
			changed()
		}
	}
}

// addTree watches dir and its subdirectories whose names do not start
// with a dot (those Load skips; changes to a ConfigMap's dot directories
// show as the swap of its "..data" link in dir itself).
func addTree(w *fsnotify.Watcher, dir string) error {
	n := 0
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if path != dir && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if n++; n > MaxFiles {
			return fmt.Errorf("more than %d directories", MaxFiles)
		}
		return w.Add(path)
	})
}
