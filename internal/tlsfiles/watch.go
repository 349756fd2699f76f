package tlsfiles

import (
	"context"

	"github.com/tollgate/tollgate/internal/filewatch"
)

// Run watches the directories of the files with fsnotify until ctx ends,
// and re-reads the files (as [Certs.Reload]) once those directories have
// been quiet for the debounce time after a change: a file written,
// created, removed or renamed, including the "..data" link a Kubernetes
// Secret volume swaps on an update. A file that is a symbolic link has
// the directory of its target watched too, so a link into another
// directory is followed. Once the watch is set up it reads the files
// once, so a change made before Run started is not missed. It returns nil
// when ctx ends, or an error if the watch cannot start.
func (c *Certs) Run(ctx context.Context) error {
	debounce := c.opts.Debounce
	if debounce <= 0 {
		debounce = DefaultDebounce
	}
	return filewatch.Watch{
		Name:     "TLS files of " + c.opts.Name,
		Files:    func() []string { return []string{c.files.Cert, c.files.Key, c.files.CA} },
		Reload:   func() { _ = c.Reload() }, // logged; the files as last loaded stay in use
		Debounce: debounce,
		Logger:   c.log,
	}.Run(ctx)
}
