package bolt_test

import (
	"path/filepath"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/tollgate/tollgate/state/bolt"
)

// TestDerivedTablesOutOfStepAreDropped: derived tables written through
// Write outlive a reopen; once a writer that does not keep them (a
// tollgate from before them, run after a downgrade) has written the
// file, the next Open drops them, so that their owners build them again
// from the records rather than trust a stale index; the records stay.
func TestDerivedTablesOutOfStepAreDropped(t *testing.T) {
	dir := t.TempDir()
	derived := bolt.DerivedPrefix + "index"
	open := func() *bolt.DB {
		t.Helper()
		db, err := bolt.Open(dir, bolt.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	has := func(db *bolt.DB, table, key string) bool {
		t.Helper()
		found := false
		if err := db.Read(func(r *bolt.Reader) error { found = r.Get(table, key) != nil; return nil }); err != nil {
			t.Fatal(err)
		}
		return found
	}

	db := open()
	if err := db.Write(func(w *bolt.Writer) error {
		if err := w.Put("records", "a", []byte("1")); err != nil {
			return err
		}
		return w.Put(derived, "a", []byte("indexed"))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = open()
	if !has(db, derived, "a") {
		t.Fatal("a derived table written in step was dropped at reopen")
	}
	db.Close()

	// An older tollgate writes a record: bbolt itself, no stamp.
	raw, err := bbolt.Open(filepath.Join(dir, bolt.FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("records"))
		if err != nil {
			return err
		}
		return b.Put([]byte("b"), []byte("2"))
	}); err != nil {
		t.Fatal(err)
	}
	raw.Close()

	db = open()
	defer db.Close()
	if has(db, derived, "a") {
		t.Fatal("the derived table survived a write that did not keep it in step")
	}
	if !has(db, "records", "a") || !has(db, "records", "b") {
		t.Fatal("records were lost with the derived table")
	}
	// Built again through Write, it stays.
	if err := db.Write(func(w *bolt.Writer) error { return w.Put(derived, "a", []byte("again")) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = open()
	if !has(db, derived, "a") {
		t.Fatal("a derived table built again was dropped at the next reopen")
	}
}
