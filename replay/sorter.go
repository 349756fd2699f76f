package replay

// This file puts the calls of a replay in time order, whatever order the
// logs hold them in — files in any order, records oldest or newest first
// or shuffled — with memory bounded: up to spillCalls calls are sorted
// in memory; past that, sorted runs are spilled to an unlinked temporary
// file and merged. Calls at one instant are played in an order of their
// own content (the caller's tie order), not the order they were read in,
// so that any order of the same records gives the same report.

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"slices"
)

// maxInMemory is how many calls of one instant are put in tie order
// together.
const maxInMemory = 1 << 21

// spillCalls is how many calls are held (24 bytes each) before a sorted
// run is spilled: fewer than maxInMemory, as a log of a million tenants
// needs its memory for their buckets, and merging runs costs little.
const spillCalls = 1 << 19

// cursorBuffer is the read buffer of each spilled run while they are
// merged.
const cursorBuffer = 16 << 10

// sortEntry is one call to sort: its instant, and what it is (v, x: the
// caller's).
type sortEntry struct {
	at, x int64
	v     int32
}

const sortEntrySize = 8 + 8 + 4

// sortRun is a spilled run: its offset in the file, and its entries.
type sortRun struct{ off, n int64 }

// sorter collects calls and plays them back in time order.
type sorter struct {
	max   int // maxInMemory, smaller in tests
	spill int // spillCalls, or max when smaller
	dir   string
	buf   []sortEntry
	f     *os.File // nil until the first spill
	w     *bufio.Writer
	off   int64
	runs  []sortRun
}

// sortMemory is maxInMemory; tests lower it to spill small logs.
var sortMemory = maxInMemory

func newSorter(dir string) *sorter {
	return &sorter{max: sortMemory, spill: min(sortMemory, spillCalls), dir: dir}
}

// add adds one call, spilling a sorted run when memory is full.
func (s *sorter) add(e sortEntry) error {
	s.buf = append(s.buf, e)
	if len(s.buf) >= s.spill {
		return s.spillRun()
	}
	return nil
}

func byTime(a, b sortEntry) int { return cmp.Compare(a.at, b.at) }

// spillRun writes the calls in memory as one sorted run.
func (s *sorter) spillRun() error {
	if s.f == nil {
		f, err := os.CreateTemp(s.dir, "tollgate-replay-*.sort")
		if err != nil {
			return fmt.Errorf("sorting the calls by time needs a temporary file: %w", err)
		}
		if err := os.Remove(f.Name()); err != nil {
			f.Close()
			return fmt.Errorf("sorting the calls by time needs a temporary file: %w", err)
		}
		s.f, s.w = f, bufio.NewWriterSize(f, 1<<20)
	}
	slices.SortFunc(s.buf, byTime)
	var b [sortEntrySize]byte
	for _, e := range s.buf {
		binary.LittleEndian.PutUint64(b[0:], uint64(e.at))
		binary.LittleEndian.PutUint64(b[8:], uint64(e.x))
		binary.LittleEndian.PutUint32(b[16:], uint32(e.v))
		if _, err := s.w.Write(b[:]); err != nil {
			return fmt.Errorf("spilling sorted calls: %w", err)
		}
	}
	s.runs = append(s.runs, sortRun{off: s.off, n: int64(len(s.buf))})
	s.off += int64(len(s.buf)) * sortEntrySize
	s.buf = s.buf[:0]
	return nil
}

// close removes the spilled runs.
func (s *sorter) close() {
	if s.f != nil {
		s.f.Close()
	}
}

// cursor reads one spilled run.
type cursor struct {
	r    *bufio.Reader
	left int64
	cur  sortEntry
}

func (c *cursor) next() (bool, error) {
	if c.left == 0 {
		return false, nil
	}
	var b [sortEntrySize]byte
	if _, err := io.ReadFull(c.r, b[:]); err != nil {
		return false, fmt.Errorf("reading sorted calls back: %w", err)
	}
	c.left--
	c.cur = sortEntry{at: int64(binary.LittleEndian.Uint64(b[0:])), x: int64(binary.LittleEndian.Uint64(b[8:])), v: int32(binary.LittleEndian.Uint32(b[16:]))}
	return true, nil
}

// drain calls play with every call in time order, those of one instant in
// tie's order. It returns how many instants held more calls than it could
// put in tie's order together (maxInMemory): theirs were played partly in
// the order read.
func (s *sorter) drain(tie func(a, b sortEntry) int, play func(sortEntry)) (inexact int64, err error) {
	batch := make([]sortEntry, 0, 1024)
	var lastAt int64
	started, split := false, false
	flush := func() {
		slices.SortFunc(batch, tie)
		for _, e := range batch {
			play(e)
		}
		batch = batch[:0]
	}
	take := func(e sortEntry) {
		if started && e.at != lastAt {
			flush()
			split = false
		}
		if len(batch) >= s.max {
			flush()
			if !split {
				inexact++
				split = true
			}
		}
		started, lastAt = true, e.at
		batch = append(batch, e)
	}
	if s.f == nil {
		slices.SortFunc(s.buf, byTime)
		for _, e := range s.buf {
			take(e)
		}
		flush()
		return inexact, nil
	}
	if len(s.buf) > 0 {
		if err := s.spillRun(); err != nil {
			return 0, err
		}
	}
	if err := s.w.Flush(); err != nil {
		return 0, fmt.Errorf("spilling sorted calls: %w", err)
	}
	s.buf = nil
	cs := make([]*cursor, 0, len(s.runs))
	for _, r := range s.runs {
		c := &cursor{r: bufio.NewReaderSize(io.NewSectionReader(s.f, r.off, r.n*sortEntrySize), cursorBuffer), left: r.n}
		ok, err := c.next()
		if err != nil {
			return 0, err
		}
		if ok {
			cs = append(cs, c)
		}
	}
	// A binary heap of the cursors by their current call's instant.
	less := func(i, j int) bool { return cs[i].cur.at < cs[j].cur.at }
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= len(cs) {
				return
			}
			m := l
			if r := l + 1; r < len(cs) && less(r, l) {
				m = r
			}
			if !less(m, i) {
				return
			}
			cs[i], cs[m] = cs[m], cs[i]
			i = m
		}
	}
	for i := len(cs)/2 - 1; i >= 0; i-- {
		down(i)
	}
	for len(cs) > 0 {
		take(cs[0].cur)
		ok, err := cs[0].next()
		if err != nil {
			return 0, err
		}
		if !ok {
			cs[0] = cs[len(cs)-1]
			cs = cs[:len(cs)-1]
		}
		down(0)
	}
	flush()
	return inexact, nil
}
