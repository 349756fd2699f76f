package bolt_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/state/bolt"
)

// write puts n records of table t and closes the store.
func write(t *testing.T, dir string, n int) {
	t.Helper()
	db, err := bolt.Open(dir, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := db.Write(func(w *bolt.Writer) error {
			return w.Put("t", strings.Repeat("k", 10)+string(rune('a'+i%26))+strings.Repeat("x", i), []byte(strings.Repeat("v", 500)))
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// refused fails unless Open refuses dir with an error naming the file and
// saying want.
func refused(t *testing.T, dir, want string) {
	t.Helper()
	db, err := bolt.Open(dir, bolt.Options{LockTimeout: 200 * time.Millisecond})
	if err == nil {
		db.Close()
		t.Fatalf("Open accepted it; want %q", want)
	}
	path := filepath.Join(dir, bolt.FileName)
	if !errors.Is(err, bolt.ErrRefused) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Open: %v; want ErrRefused naming %s and saying %q", err, path, want)
	}
}

func TestOpenRefusesAFileItCannotTrust(t *testing.T) {
	t.Run("truncated", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, 200)
		// Past its header pages, short of its data (the file is grown
		// ahead of the data, so half of it may still hold all of it).
		path := filepath.Join(dir, bolt.FileName)
		if err := os.Truncate(path, 4*int64(os.Getpagesize())); err != nil {
			t.Fatal(err)
		}
		refused(t, dir, "truncated")
	})
	t.Run("truncated to nothing but a header", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, 1)
		if err := os.Truncate(filepath.Join(dir, bolt.FileName), 100); err != nil {
			t.Fatal(err)
		}
		refused(t, dir, "truncated")
	})
	t.Run("corrupt", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, 50)
		path := filepath.Join(dir, bolt.FileName)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 * os.Getpagesize() { // both meta pages
			b[i] ^= 0x5a
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		refused(t, dir, "corrupt")
	})
	t.Run("a damaged data page", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, 200)
		path := filepath.Join(dir, bolt.FileName)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i := 2 * os.Getpagesize(); i < len(b); i += 7 {
			b[i] ^= 0xff
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		refused(t, dir, "corrupt")
	})
	t.Run("not a bbolt file", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, bolt.FileName), []byte(strings.Repeat("not a database\n", 1000)), 0o600); err != nil {
			t.Fatal(err)
		}
		refused(t, dir, "corrupt")
	})
	t.Run("newer schema", func(t *testing.T) {
		dir := t.TempDir()
		db, err := bolt.Open(dir, bolt.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Write(func(w *bolt.Writer) error { return w.Put("_meta", "schema", []byte("99")) }); err != nil {
			t.Fatal(err)
		}
		db.Close()
		refused(t, dir, "a newer tollgate wrote it (schema version 99")
	})
	t.Run("open elsewhere", func(t *testing.T) {
		dir := t.TempDir()
		db, err := bolt.Open(dir, bolt.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		refused(t, dir, "another process holds it open")
	})
}

// Concurrent writes each return once their record is in the file, and
// share commits: a reopened store has every one.
func TestWritesAreKeptAndShareCommits(t *testing.T) {
	dir := t.TempDir()
	db, err := bolt.Open(dir, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := range 20 {
				key := string(rune('a'+w)) + string(rune('a'+i))
				if err := db.Write(func(wr *bolt.Writer) error { return wr.Put("t", key, []byte(key)) }); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	db.Close()
	db, err = bolt.Open(dir, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := 0
	if err := db.Read(func(r *bolt.Reader) error {
		return r.Each("t", "", func(k, v []byte) error {
			if string(k) != string(v) {
				t.Errorf("%s = %s", k, v)
			}
			n++
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if n != 16*20 {
		t.Fatalf("%d records after reopening, want %d", n, 16*20)
	}
}

// A write that fails leaves the store failed: no later write is
// acknowledged.
func TestAFailedWriteFailsTheRest(t *testing.T) {
	db, err := bolt.Open(t.TempDir(), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	boom := errors.New("boom")
	if err := db.Write(func(*bolt.Writer) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Write: %v, want boom", err)
	}
	if err := db.Write(func(w *bolt.Writer) error { return w.Put("t", "k", []byte("v")) }); !errors.Is(err, bolt.ErrFailed) {
		t.Fatalf("the next Write: %v, want ErrFailed", err)
	}
}
