package tlsfiles

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Run watches the directories of the files with fsnotify until ctx ends,
// and re-reads the files (as [Certs.Reload]) once those directories have
// been quiet for the debounce time after a change: a file written,
// created, removed or renamed, including the "..data" link a Kubernetes
// Secret volume swaps on an update. A file that is a symbolic link has
// the directory of its target watched too, so a link into another
// directory is followed. Once the watch is set up it reads the files
// once, so a change made before Run started is not missed. It returns nil when ctx ends, or an error if the
// watch cannot start.
func (c *Certs) Run(ctx context.Context) error {
	debounce := c.opts.Debounce
	if debounce <= 0 {
		debounce = DefaultDebounce
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching the TLS files of %s: %w", c.opts.Name, err)
	}
	defer w.Close()
	watched := map[string]bool{}
	if err := c.watchDirs(w, watched); err != nil {
		return fmt.Errorf("watching the TLS files of %s: %w", c.opts.Name, err)
	}
	// A change between Load and the watch's start sent no event: read the
	// files once now that later changes will (a no-op if they are the same).
	_ = c.Reload() // logged; the files as last loaded stay in use
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
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
			timer.Reset(debounce)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			c.log.Warn("TLS files: watch error; re-reading them to be safe", "for", c.opts.Name, "error", err)
			timer.Reset(debounce)
		case <-timer.C:
			_ = c.Reload() // logged; the files as last loaded stay in use
			if err := c.watchDirs(w, watched); err != nil {
				c.log.Warn("TLS files: cannot watch a directory; changes there are picked up on the next reload", "for", c.opts.Name, "error", err)
			}
		}
	}
}

// watchDirs makes w watch the directory of each file and of each file's
// symbolic link target, as they are now, and stop watching those no file
// is in any more; watched is the set being watched.
func (c *Certs) watchDirs(w *fsnotify.Watcher, watched map[string]bool) error {
	want := map[string]bool{}
	for _, f := range []string{c.files.Cert, c.files.Key, c.files.CA} {
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
		if err := w.Add(dir); err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("%s: %w", dir, err)
			}
			continue
		}
		watched[dir] = true
	}
	for dir := range watched {
		if !want[dir] {
			_ = w.Remove(dir) // gone already when its directory was deleted
			delete(watched, dir)
		}
	}
	return firstErr
}
