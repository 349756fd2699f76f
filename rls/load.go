package rls

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Bounds on what [Load] reads: a directory holding more is refused whole,
// before any of it is parsed.
const (
	MaxFileBytes  = 16 << 20 // one config file
	MaxTotalBytes = 64 << 20 // every file of the directory together
	MaxFiles      = 4096     // files in the directory, recursively
)

// DefaultLoadTimeout bounds one [Load] when LoadOptions.Timeout is 0.
const DefaultLoadTimeout = 10 * time.Second

// Load reads envoy ratelimit config files as envoy ratelimit does from its
// runtime directory: every file under dir, recursively, in lexical order,
// whatever its name ("rules" and "config.yaml" alike; a file that is not
// YAML is an error, as in envoy ratelimit), skipping names that start
// with a dot (so the "..data" links of a Kubernetes ConfigMap volume are
// read once). dir may also name one file, or be a symbolic link to the
// directory (envoy ratelimit's RUNTIME_ROOT=/srv/runtime_data/current),
// resolved at every load; the files are named under dir. Every problem of every file is
// reported, each with its file, line, column and field, as
// config.ConfigErrors; nothing is partially loaded.
//
// Load reads regular files only (symbolic links to them are followed): a
// named pipe, socket or device under dir is an error, found without
// opening it for a blocking read. It refuses more than MaxFiles files, a
// file over MaxFileBytes or more than MaxTotalBytes in all, and gives up
// after LoadOptions.Timeout.
func Load(dir string, opts LoadOptions) (*Config, error) {
	return LoadContext(context.Background(), dir, opts)
}

// LoadContext is [Load] that also gives up when ctx ends (a server
// shutting down), with an error wrapping ctx's.
func LoadContext(ctx context.Context, dir string, opts LoadOptions) (*Config, error) {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultLoadTimeout
	}
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("reading %s took longer than %v", dir, timeout))
	defer cancel()
	files, err := readDir(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	cfg, err := Parse(files, opts)
	if err != nil {
		return nil, err
	}
	cfg.digest = digestFiles(files)
	return cfg, nil
}

// DirDigest reads the config files under dir as [Load] does, with its
// bounds, and returns their [Config.Digest].
func DirDigest(ctx context.Context, dir string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, DefaultLoadTimeout)
	defer cancel()
	files, err := readDir(ctx, dir)
	if err != nil {
		return "", err
	}
	return digestFiles(files), nil
}

// digestFiles hashes the files' names and contents, in the order read.
func digestFiles(files []File) string {
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%d:%s:%d:", len(f.Name), f.Name, len(f.Data))
		h.Write(f.Data)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// readDir reads the config files under dir (or dir itself, a file).
//
// dir may be a symbolic link to the directory, as envoy ratelimit's
// documented RUNTIME_ROOT=/srv/runtime_data/current is, swapped to a new
// directory on a deploy: the link is resolved once per call and the walk
// and the reads go through what it named then, so one load reads one
// version whole even while the link is swapped. Files keep their names
// under dir, so a swap to the same files reads as no change.
func readDir(ctx context.Context, dir string) ([]File, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		data, err := readFile(ctx, dir, dir, MaxFileBytes)
		if err != nil {
			return nil, err
		}
		return []File{{Name: dir, Data: data}}, nil
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, err
	}
	var paths []string // under root
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := context.Cause(ctx); ctx.Err() != nil {
			return err
		}
		if path != root && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if len(paths) == MaxFiles {
			return fmt.Errorf("%s: more than %d files", dir, MaxFiles)
		}
		paths = append(paths, path)
		return nil
	})
	if err != nil {
		return nil, err
	}
	files := make([]File, 0, len(paths))
	total := 0
	for _, p := range paths {
		name := p
		if rel, err := filepath.Rel(root, p); err == nil {
			name = filepath.Join(dir, rel)
		}
		data, err := readFile(ctx, p, name, min(MaxFileBytes, MaxTotalBytes-total))
		if err != nil {
			return nil, err
		}
		total += len(data)
		files = append(files, File{Name: name, Data: data})
	}
	return files, nil
}

// readFile reads the regular file at path, at most limit bytes, until ctx
// ends; its errors call the file name. The open is non-blocking, so a
// named pipe without a writer cannot hang it, and anything but a regular
// file is refused before it is read.
func readFile(ctx context.Context, path, name string, limit int) (data []byte, err error) {
	defer func() {
		var pe *fs.PathError
		if err != nil && errors.As(err, &pe) && pe.Path == path {
			pe.Path = name
		}
	}()
	if err := context.Cause(ctx); ctx.Err() != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s); only regular files are read", name, fileKind(fi.Mode()))
	}
	if fi.Size() > int64(limit) {
		return nil, tooLarge(name, limit)
	}
	// A regular file's reads do not wait on a writer; the deadline and
	// the check between reads bound a slow mount.
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	data, err = io.ReadAll(io.LimitReader(ctxReader{ctx, f}, int64(limit)+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", name, context.Cause(ctx))
		}
		return nil, err
	}
	if len(data) > limit {
		return nil, tooLarge(name, limit)
	}
	return data, nil
}

func tooLarge(path string, limit int) error {
	if limit < MaxFileBytes {
		return fmt.Errorf("%s: the directory's files are larger than %d bytes in all", path, MaxTotalBytes)
	}
	return fmt.Errorf("%s: larger than %d bytes", path, MaxFileBytes)
}

// ctxReader stops reading once ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if c.ctx.Err() != nil {
		return 0, c.ctx.Err()
	}
	return c.r.Read(p)
}

// fileKind names a file mode's type for errors.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	}
	return "mode " + m.String()
}
