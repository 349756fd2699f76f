// Package filewatch re-reads files when they change: it watches their
// directories with fsnotify (and the directories of their symbolic links'
// targets, so a Kubernetes Secret or ConfigMap volume's "..data" swap is
// seen) and calls a reload once the directories have been quiet for a
// debounce time.
package filewatch

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch is what to watch and what to do on a change.
type Watch struct {
	// Name says what the files are, for errors and logs ("TLS files of
	// HTTP listener").
	Name string
	// Files returns the files to watch; it is called again after each
	// reload, so the set may change. Empty paths are skipped.
	Files func() []string
	// Reload re-reads the files; it logs its own errors.
	Reload func()
	// Debounce is the quiet time after a change before Reload runs.
	Debounce time.Duration
	// Logger receives watch errors; nil discards them.
	Logger *slog.Logger
}

// Run watches until ctx ends. Once the watch is set up it calls Reload
// once, so a change made before Run started is not missed. It returns nil
// when ctx ends, or an error if the watch cannot start.
func (w Watch) Run(ctx context.Context) error {
	log := w.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching the %s: %w", w.Name, err)
	}
	defer fw.Close()
	watched := map[string]bool{}
	if err := w.watchDirs(fw, watched); err != nil {
		return fmt.Errorf("watching the %s: %w", w.Name, err)
	}
	// A change between the first read and the watch's start sent no
	// event: read the files once now that later changes will.
	w.Reload()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-fw.Events:
			if !ok {
				return nil
			}
			if ev.Op == fsnotify.Chmod {
				continue
			}
			timer.Reset(w.Debounce)
		case err, ok := <-fw.Errors:
			if !ok {
				return nil
			}
			log.Warn("watch error; re-reading the files to be safe", "files", w.Name, "error", err)
			timer.Reset(w.Debounce)
		case <-timer.C:
			w.Reload()
			if err := w.watchDirs(fw, watched); err != nil {
				log.Warn("cannot watch a directory; changes there are picked up on the next reload", "files", w.Name, "error", err)
			}
		}
	}
}

// watchDirs makes fw watch the directory of each file and of each file's
// symbolic link target, as they are now, and stop watching those no file
// is in any more; watched is the set being watched.
func (w Watch) watchDirs(fw *fsnotify.Watcher, watched map[string]bool) error {
	want := map[string]bool{}
	for _, f := range w.Files() {
		if f == "" {
			continue
		}
		abs, err := filepath.Abs(f)
		if err != nil {
			return err
		}
		want[filepath.Dir(abs)] = true
		if target, err := filepath.EvalSymlinks(abs); err == nil {
			want[filepath.Dir(target)] = true
		}
	}
	var firstErr error
	for dir := range want {
		if watched[dir] {
			continue
		}
		if err := fw.Add(dir); err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("%s: %w", dir, err)
			}
			continue
		}
		watched[dir] = true
	}
	for dir := range watched {
		if !want[dir] {
			_ = fw.Remove(dir) // gone already when its directory was deleted
			delete(watched, dir)
		}
	}
	return firstErr
}
