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
// (at most MaxFiles of them). A symbolic link named in dir's path (dir
// itself, as envoy ratelimit's RUNTIME_ROOT=/srv/runtime_data/current, or
// a directory above it) is followed, and its swap to another target is a
// change: the watch moves to what it names now. changed should queue the
// same bounded, all-or-nothing reload as SIGHUP; Watch never reads the
// files itself. It returns nil when ctx ends, or an error if the watch
// cannot start.
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
	// The directories holding the links watch for those names only.
	links := pathLinks(dir)
	linkDirs := make(map[string]bool, len(links))
	for l := range links {
		d := filepath.Dir(l)
		if !linkDirs[d] {
			if err := w.Add(d); err != nil {
				return fmt.Errorf("watching %s: %w", dir, err)
			}
			linkDirs[d] = true
		}
	}
	target, err := watchTarget(w, dir, info.IsDir())
	if err != nil {
		return fmt.Errorf("watching %s: %w", dir, err)
	}
	if !info.IsDir() {
		delete(linkDirs, filepath.Dir(filepath.Clean(dir))) // a file's directory: every change counts
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
			name := filepath.Clean(ev.Name)
			if links[name] {
				if now, err := filepath.EvalSymlinks(dir); err == nil && now != target {
					// The link names another directory: watch that one.
					for _, p := range w.WatchList() {
						if !linkDirs[p] {
							_ = w.Remove(p) // gone already when its directory was removed
						}
					}
					if target, err = watchTarget(w, dir, info.IsDir()); err != nil {
						log.Warn("envoy ratelimit config: cannot watch the link's new target", "dir", dir, "error", err)
					}
				}
			} else if linkDirs[filepath.Dir(name)] {
				continue // another name beside a link
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

// watchTarget watches what dir names now (its links resolved): the
// directory's tree, or the directory of a file. It returns the resolved
// path.
func watchTarget(w *fsnotify.Watcher, dir string, isDir bool) (string, error) {
	target, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", err
	}
	if !isDir {
		return target, w.Add(filepath.Dir(dir))
	}
	return target, addTree(w, target)
}

// pathLinks returns the symbolic links among the components of dir's
// path, dir included: the names whose swap changes what dir is.
func pathLinks(dir string) map[string]bool {
	links := map[string]bool{}
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			links[p] = true
		}
		if filepath.Dir(p) == p {
			return links
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
