package bolt_test

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/state"
	"github.com/tollgate/tollgate/state/bolt"
)

// Writers of many owners note changes and write them concurrently: every
// change is on disk once its Write returned, each owner is busy exactly
// while it has a change not on disk, and a failed flush leaves its
// changes to the next commit.
func TestGroupWritesEveryChangeAndTellsBusyOwners(t *testing.T) {
	db, err := bolt.Open(t.TempDir(), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mu sync.Mutex
	values := map[string]string{}
	failNext := false
	g := bolt.NewGroup(db, &mu, func(w *bolt.Writer, changes map[string]string) error {
		if failNext {
			return errors.New("refused")
		}
		for k, owner := range changes {
			if err := w.Put("t", owner+"/"+k, []byte(values[k])); err != nil {
				return err
			}
		}
		return nil
	})
	mu.Lock()
	values["first"] = "1"
	g.Note("first", "a")
	if !g.Busy("a") || g.Busy("b") || !g.Pending() {
		t.Fatal("a noted change does not make its owner busy, or makes another")
	}
	mu.Unlock()
	if err := g.Write(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if g.Busy("a") || g.Pending() {
		t.Fatal("an owner is busy after its change is on disk")
	}
	mu.Unlock()
	var wg sync.WaitGroup
	errs := make(chan error, 256)
	for w := range 16 {
		wg.Go(func() {
			for i := range 16 {
				k, owner := fmt.Sprintf("k-%d-%d", w, i), fmt.Sprint("o-", w%4)
				mu.Lock()
				values[k] = k
				g.Note(k, owner)
				mu.Unlock()
				if err := g.Write(); err != nil {
					errs <- err
					return
				}
				if err := db.Read(func(r *bolt.Reader) error {
					if string(r.Get("t", owner+"/"+k)) != k {
						return fmt.Errorf("%s is not on disk after its write", k)
					}
					return nil
				}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	mu.Lock()
	for w := range 4 {
		if g.Busy(fmt.Sprint("o-", w)) {
			t.Fatalf("o-%d is busy after every write returned", w)
		}
	}
	// A flush that fails (bbolt retries a group's failing write alone,
	// which fails again) fails its write, and the store with it: the
	// change stays noted, its owner busy.
	values["late"] = "x"
	g.Note("late", "c")
	failNext = true
	mu.Unlock()
	if err := g.Write(); err == nil {
		t.Fatal("a failed flush did not fail its write")
	}
	mu.Lock()
	defer mu.Unlock()
	if !g.Busy("c") {
		t.Fatal("an owner whose change failed is not busy")
	}
}

// Fill writes records in any order, across transactions, and an export
// leaves out derived tables, which an import drops.
func TestFillAndDerivedTables(t *testing.T) {
	dir := t.TempDir()
	db, err := bolt.Open(dir, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var recs []state.Record
	for i := range 10_000 {
		recs = append(recs, state.Record{Table: "_idx", Key: fmt.Sprintf("k%05d", (i*7919)%10_000), Value: "v"})
	}
	recs = append(recs, state.Record{Table: "t", Key: "kept", Value: "1"})
	if err := db.Fill(recs); err != nil {
		t.Fatal(err)
	}
	var keys []string
	if err := db.Read(func(r *bolt.Reader) error {
		return r.EachBefore("_idx", "k", "k00100", func(k, _ []byte) error {
			keys = append(keys, string(k))
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 100 || keys[0] != "k00099" || keys[99] != "k00000" || !slices.IsSortedFunc(keys, func(a, b string) int { return strings.Compare(b, a) }) {
		t.Fatalf("EachBefore k00100 gave %d keys, %v…", len(keys), keys[:min(3, len(keys))])
	}
	var sb strings.Builder
	sw, err := state.NewWriter(&sb)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Export(sw); err != nil || sw.Flush() != nil {
		t.Fatal(err)
	}
	if strings.Contains(sb.String(), "_idx") || !strings.Contains(sb.String(), "kept") {
		t.Fatalf("export: %s", sb.String())
	}
	sr, err := state.NewReader(strings.NewReader(sb.String()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Import(sr); err != nil {
		t.Fatal(err)
	}
	if err := db.Read(func(r *bolt.Reader) error {
		if r.Get("_idx", "k00001") != nil {
			return errors.New("an import kept a derived table")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	bad := &sliceSource{recs: []state.Record{{Table: "_idx", Key: "k", Value: "v"}}}
	if _, err := db.Import(bad); err == nil || !strings.Contains(err.Error(), "derived") {
		t.Fatalf("importing a derived table: %v", err)
	}
}

type sliceSource struct {
	recs []state.Record
	i    int
}

func (s *sliceSource) Next() (state.Record, error) {
	if s.i == len(s.recs) {
		return state.Record{}, io.EOF
	}
	s.i++
	return s.recs[s.i-1], nil
}

func (s *sliceSource) Line() int { return s.i }
