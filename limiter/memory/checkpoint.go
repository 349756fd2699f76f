package memory

// This file is the store's checkpoint: the buckets in debt written to a
// file, so that a restarted node hands no tenant a fresh burst.
//
// The file is
//
//	"tollgate buckets\n"            16 bytes, the magic
//	version                         uint32, big-endian (1)
//	count                           uint64, big-endian
//	count × { key length uvarint, key, state int64 big-endian }
//	CRC-32C of everything above     uint32, big-endian
//
// A state is the instant the bucket is full again, in Unix nanoseconds:
// it means the same after a restart, and a bucket whose instant has
// passed is not restored.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/tollgate/tollgate/bucket"
)

// checkpointMagic begins every checkpoint file.
const checkpointMagic = "tollgate buckets\n"

// CheckpointVersion is the version of the checkpoint files this package
// writes; it reads no newer one.
const CheckpointVersion = 1

// Bounds of a checkpoint a store reads: a file larger than
// MaxCheckpointBytes, or a key longer than maxCheckpointKey, is refused.
const (
	MaxCheckpointBytes = 1 << 30
	maxCheckpointKey   = 1 << 16
)

// ErrCheckpoint is wrapped by the errors of a checkpoint file that is
// corrupt, truncated or from a newer version.
var ErrCheckpoint = errors.New("bucket checkpoint unreadable")

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// WriteCheckpoint writes the buckets in debt to w, in the checkpoint
// format, and returns how many it wrote. Each shard is read under its
// lock, one at a time: takes go on meanwhile.
func (s *Store) WriteCheckpoint(w io.Writer) (int, error) {
	now := s.now()
	type entry struct {
		key   string
		state int64
	}
	var all []entry
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k, tat := range sh.m {
			if tat > now {
				all = append(all, entry{k, tat})
			}
		}
		sh.mu.Unlock()
	}
	crc := crc32.New(crcTable)
	bw := bufio.NewWriter(io.MultiWriter(w, crc))
	var head [len(checkpointMagic) + 12]byte
	copy(head[:], checkpointMagic)
	binary.BigEndian.PutUint32(head[len(checkpointMagic):], CheckpointVersion)
	binary.BigEndian.PutUint64(head[len(checkpointMagic)+4:], uint64(len(all)))
	bw.Write(head[:])
	var buf [binary.MaxVarintLen64 + 8]byte
	for _, e := range all {
		bw.Write(binary.AppendUvarint(buf[:0], uint64(len(e.key))))
		bw.WriteString(e.key)
		bw.Write(binary.BigEndian.AppendUint64(buf[:0], uint64(e.state)))
	}
	if err := bw.Flush(); err != nil {
		return 0, err
	}
	if _, err := w.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32())); err != nil {
		return 0, err
	}
	return len(all), nil
}

// ReadCheckpoint restores the buckets of a checkpoint read from r (at
// most MaxCheckpointBytes): each bucket still in debt is set to its state,
// or kept at its own if that is deeper. It returns how many it restored.
// A checkpoint that is corrupt, truncated or from a newer version
// restores nothing and returns an error wrapping [ErrCheckpoint].
func (s *Store) ReadCheckpoint(r io.Reader) (int, error) {
	entries, err := parseCheckpoint(r)
	if err != nil {
		return 0, err
	}
	now := s.now()
	n := 0
	for _, e := range entries {
		if e.state <= now {
			continue
		}
		sh := s.shard(e.key)
		sh.mu.Lock()
		tat, tracked := sh.m[e.key]
		if !tracked || tat < e.state {
			s.store(sh, e.key, tracked, bucket.State(e.state), now)
			n++
		}
		sh.mu.Unlock()
	}
	return n, nil
}

// checkpointEntry is one bucket of a checkpoint.
type checkpointEntry struct {
	key   string
	state int64
}

// parseCheckpoint reads and checks a whole checkpoint.
func parseCheckpoint(r io.Reader) ([]checkpointEntry, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxCheckpointBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	if len(data) > MaxCheckpointBytes {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrCheckpoint, MaxCheckpointBytes)
	}
	head := len(checkpointMagic) + 12
	if len(data) < len(checkpointMagic) || string(data[:len(checkpointMagic)]) != checkpointMagic {
		return nil, fmt.Errorf("%w: not a tollgate bucket checkpoint (no %q header)", ErrCheckpoint, checkpointMagic[:len(checkpointMagic)-1])
	}
	if len(data) < head+4 {
		return nil, fmt.Errorf("%w: truncated: %d bytes", ErrCheckpoint, len(data))
	}
	if v := binary.BigEndian.Uint32(data[len(checkpointMagic):]); v != CheckpointVersion {
		return nil, fmt.Errorf("%w: version %d, from a newer tollgate (this one reads version %d)", ErrCheckpoint, v, CheckpointVersion)
	}
	body, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, crcTable) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch (corrupt or truncated)", ErrCheckpoint)
	}
	count := binary.BigEndian.Uint64(data[len(checkpointMagic)+4:])
	rest := body[head:]
	// Each entry takes at least 9 bytes: a count beyond that is corrupt.
	if count > uint64(len(rest))/9 {
		return nil, fmt.Errorf("%w: %d buckets announced in %d bytes", ErrCheckpoint, count, len(rest))
	}
	entries := make([]checkpointEntry, 0, count)
	for i := range count {
		kl, n := binary.Uvarint(rest)
		if n <= 0 || kl > maxCheckpointKey || uint64(len(rest)-n) < kl+8 {
			return nil, fmt.Errorf("%w: bucket %d: bad key length", ErrCheckpoint, i)
		}
		rest = rest[n:]
		key := string(rest[:kl])
		state := int64(binary.BigEndian.Uint64(rest[kl:]))
		rest = rest[kl+8:]
		entries = append(entries, checkpointEntry{key, state})
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last bucket", ErrCheckpoint, len(rest))
	}
	return entries, nil
}

// SaveCheckpoint writes the buckets in debt to the file at path,
// atomically: to a temporary file in the same directory, synced, renamed
// over path, and the directory synced, so that a crash leaves either the
// old checkpoint or the new one. It returns how many buckets it wrote.
func (s *Store) SaveCheckpoint(path string) (int, error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return 0, fmt.Errorf("bucket checkpoint: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, nothing
	n, err := s.WriteCheckpoint(tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return 0, fmt.Errorf("bucket checkpoint %s: %w", path, err)
	}
	return n, nil
}

// LoadCheckpoint restores the buckets of the checkpoint file at path (see
// ReadCheckpoint). A missing file restores nothing and is no error (a
// first start); an unreadable one is an error naming the file.
func (s *Store) LoadCheckpoint(path string) (int, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("bucket checkpoint %s: %w", path, err)
	}
	defer f.Close()
	n, err := s.ReadCheckpoint(f)
	if err != nil {
		return 0, fmt.Errorf("bucket checkpoint %s: %w", path, err)
	}
	return n, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
