// Package bolt is tollgate's embedded durable store: one bbolt file
// (go.etcd.io/bbolt, the B+tree etcd keeps its state in) in a data
// directory, holding state.Records in one bbolt bucket per table.
//
// A write (DB.Write) returns only once its transaction is on disk
// (fsync), and concurrent writes share transactions (bbolt's DB.Batch: a
// group commit), so that the fsync cost is paid once per group, not per
// write. A write that fails leaves the store failed: every later write
// fails too, so that nothing is acknowledged after a change that was not
// kept; restart to recover.
//
// Open refuses a file it cannot trust, with a message naming the file and
// what to do: one already open by another process (bbolt's flock, waited
// for Options.LockTimeout), a truncated or corrupt one (checked whole at
// open), one of a newer schema version.
//
// The package owns the file and its transactions. It never decides what
// a record means: its owners (cloudmap, servicequotas) do.
//
// # Lifecycle
//
//  1. Open, which refuses a file it cannot trust.
//  2. Read and Write, from any goroutine; Export streams a consistent copy.
//  3. Close.
package bolt

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/tollgate/tollgate/state"
)

// FileName is the store's file in its data directory.
const FileName = "tollgate.db"

// initialMmap is the address space the file is mapped with at open.
const initialMmap = 1 << 30

// metaTable holds the schema version (key "schema").
const metaTable = "_meta"

// DerivedPrefix starts the name of a table that its owner derives from
// its records (indexes, counters): an export leaves it out, an import
// drops it, and the owner rebuilds it from the records when it is absent.
// The store's own metaTable starts with it too, and is kept.
const DerivedPrefix = "_"

// Options configure Open. The zero value works.
type Options struct {
	// LockTimeout is how long Open waits for another process to close
	// the file; 0 means 1 s.
	LockTimeout time.Duration
	// MaxBatchDelay is how long a write waits for others to share its
	// commit; 0 means bbolt's default (10 ms), which is only reached when
	// fewer writers than MaxBatchSize are waiting.
	MaxBatchDelay time.Duration
	// NoCheck skips the check of every page at Open (for a quick look at
	// a file, such as an export beside a running server).
	NoCheck bool
	// ReadOnly opens the file for reading only (a shared lock).
	ReadOnly bool
}

// DB is an open store.
type DB struct {
	db     *bbolt.DB
	path   string
	failed atomic.Pointer[error]
}

// ErrRefused is wrapped by Open's error for a file it will not use.
var ErrRefused = errors.New("the data file cannot be used")

// ErrFailed is wrapped by the error of every Write after one failed.
var ErrFailed = errors.New("the data file failed a write earlier; restart tollgate")

// Open opens (creating it and dir when absent) the store in dir. Its
// error wraps ErrRefused for a file it will not use.
func Open(dir string, o Options) (*DB, error) {
	if o.LockTimeout == 0 {
		o.LockTimeout = time.Second
	}
	if !o.ReadOnly {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("data directory %s: %w", dir, err)
		}
	}
	path := filepath.Join(dir, FileName)
	refuse := func(why, todo string) error {
		return fmt.Errorf("%w: %s: %s; %s", ErrRefused, path, why, todo)
	}
	if st, err := os.Stat(path); err == nil && st.Size() > 0 && st.Size() < 2*int64(os.Getpagesize()) {
		return nil, refuse("it is truncated ("+strconv.FormatInt(st.Size(), 10)+" bytes, less than its two header pages)",
			"restore it from a backup (tollgate state export) or move it away to start empty")
	}
	need, err := neededBytes(path)
	if err != nil {
		return nil, refuse(err.Error(), "check the file's permissions")
	}
	if st, err := os.Stat(path); err == nil && st.Size() < need {
		return nil, refuse(fmt.Sprintf("it is truncated (%d bytes of %d)", st.Size(), need),
			"restore it from a backup (tollgate state export) or move it away to start empty")
	}
	var db *bbolt.DB
	err = safely(func() (err error) {
		// A write that grows the file past the map waits for every read
		// transaction (an export streamed to a slow client): map 1 GiB
		// of address space from the start, as etcd maps 10 GiB.
		db, err = bbolt.Open(path, 0o600, &bbolt.Options{Timeout: o.LockTimeout, ReadOnly: o.ReadOnly, InitialMmapSize: initialMmap})
		return err
	})
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return nil, refuse("another process holds it open (waited "+o.LockTimeout.String()+")",
			"stop the other tollgate, or give this one another --data-dir")
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum):
		return nil, refuse("it is corrupt ("+err.Error()+")", "restore it from a backup (tollgate state export) or move it away to start empty")
	case errors.Is(err, berrors.ErrVersionMismatch):
		return nil, refuse("another bbolt version wrote it", "use the tollgate that wrote it to export it (tollgate state export)")
	case err != nil:
		return nil, refuse(err.Error(), "check the file's permissions, or move it away to start empty")
	}
	d := &DB{db: db, path: path}
	if err := safely(func() error { return d.check(o, refuse) }); err != nil {
		db.Close()
		return nil, err
	}
	if !o.ReadOnly {
		if err := d.dropStaleDerived(); err != nil {
			db.Close()
			return nil, err
		}
	}
	if o.MaxBatchDelay > 0 {
		db.MaxBatchDelay = o.MaxBatchDelay
	}
	return d, nil
}

// stampKey, in metaTable, is the number of the last transaction written
// through this package (Write, Fill), which keeps the derived tables in
// step with the records. A tollgate from before derived tables writes
// records without them: its transactions leave the stamp behind, and the
// next Open drops the derived tables, which their owners then build
// again from the records (a downgrade and an upgrade lose nothing).
const stampKey = "written_tx"

// stamp notes tx as written in step with the derived tables.
func stamp(tx *bbolt.Tx) error {
	b, err := tx.CreateBucketIfNotExists([]byte(metaTable))
	if err != nil {
		return fmt.Errorf("table %s: %w", metaTable, err)
	}
	return b.Put([]byte(stampKey), strconv.AppendInt(nil, int64(tx.ID()), 10))
}

// dropStaleDerived drops the derived tables when a transaction that did
// not keep them in step (see stampKey) wrote the file last.
func (d *DB) dropStaleDerived() error {
	stale := false
	err := d.db.View(func(tx *bbolt.Tx) error {
		var v []byte
		if b := tx.Bucket([]byte(metaTable)); b != nil {
			v = b.Get([]byte(stampKey))
		}
		stale = string(v) != strconv.Itoa(int(tx.ID()))
		return nil
	})
	if err != nil || !stale {
		return err
	}
	if err := d.db.Update(func(tx *bbolt.Tx) error {
		if err := dropDerived(tx); err != nil {
			return err
		}
		return stamp(tx)
	}); err != nil {
		return fmt.Errorf("%s: dropping derived tables written out of step: %w", d.path, err)
	}
	return nil
}

// dropDerived deletes every derived table (DerivedPrefix) but metaTable.
func dropDerived(tx *bbolt.Tx) error {
	var derived [][]byte
	_ = tx.ForEach(func(name []byte, _ *bbolt.Bucket) error {
		if string(name) != metaTable && strings.HasPrefix(string(name), DerivedPrefix) {
			derived = append(derived, append([]byte(nil), name...))
		}
		return nil
	})
	for _, name := range derived {
		if err := tx.DeleteBucket(name); err != nil {
			return fmt.Errorf("table %s: %w", name, err)
		}
	}
	return nil
}

// errPanicked wraps what bbolt panicked with reading a damaged file.
var errPanicked = errors.New("unreadable page")

// safely runs fn, turning a panic of bbolt's reading a damaged file (or
// a fault reading its memory map) into an error wrapping
// berrors.ErrInvalid.
func safely(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %w: %v", berrors.ErrInvalid, errPanicked, p)
		}
	}()
	return fn()
}

// check refuses a truncated or corrupt file, or one of a newer schema,
// and marks a new file with the schema version.
func (d *DB) check(o Options, refuse func(why, todo string) error) error {
	st, err := os.Stat(d.path)
	if err != nil {
		return refuse(err.Error(), "check the data directory")
	}
	backup := "restore it from a backup (tollgate state export) or move it away to start empty"
	err = d.db.View(func(tx *bbolt.Tx) error {
		if tx.Size() > st.Size() {
			return refuse(fmt.Sprintf("it is truncated (%d bytes of %d)", st.Size(), tx.Size()), backup)
		}
		if o.NoCheck {
			return nil
		}
		var first error
		for err := range tx.Check() { // read to the end: Check's goroutine sends them all
			if first == nil {
				first = err
			}
		}
		if first != nil {
			return refuse("it is corrupt ("+first.Error()+")", backup)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var version int
	read := func(tx *bbolt.Tx) error {
		if b := tx.Bucket([]byte(metaTable)); b != nil {
			if v := b.Get([]byte("schema")); v != nil {
				n, err := strconv.Atoi(string(v))
				if err != nil {
					return refuse(fmt.Sprintf("its schema version %q is not a number", v), backup)
				}
				version = n
			}
		}
		return nil
	}
	if err := d.db.View(read); err != nil {
		return err
	}
	switch {
	case version > state.SchemaVersion:
		return refuse(fmt.Sprintf("a newer tollgate wrote it (schema version %d; this one reads %d)", version, state.SchemaVersion),
			"run that tollgate, or export the state with it and import it here")
	case version == 0 && !o.ReadOnly:
		return d.db.Update(func(tx *bbolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte(metaTable))
			if err != nil {
				return fmt.Errorf("%s: %w", d.path, err)
			}
			return b.Put([]byte("schema"), []byte(strconv.Itoa(state.SchemaVersion)))
		})
	}
	return nil
}

// Path is the store's file.
func (d *DB) Path() string { return d.path }

// Close closes the file.
func (d *DB) Close() error {
	if err := d.db.Close(); err != nil {
		return fmt.Errorf("%s: %w", d.path, err)
	}
	return nil
}

// Write runs fn in a write transaction shared with concurrent writes and
// returns once the transaction is on disk. fn may run more than once (if
// another write in its group fails, the group is retried without it), so
// it must only write what its owner holds at the time it runs.
func (d *DB) Write(fn func(*Writer) error) error {
	if p := d.failed.Load(); p != nil {
		return fmt.Errorf("%s: %w (it failed: %w)", d.path, ErrFailed, *p)
	}
	err := d.db.Batch(func(tx *bbolt.Tx) error {
		if err := fn(&Writer{tx: tx}); err != nil {
			return err
		}
		return stamp(tx)
	})
	if err != nil {
		err = fmt.Errorf("%s: write: %w", d.path, err)
		d.failed.CompareAndSwap(nil, &err)
	}
	return err
}

// Read runs fn in a read transaction: a consistent view of the store.
func (d *DB) Read(fn func(*Reader) error) error {
	return d.db.View(func(tx *bbolt.Tx) error { return fn(&Reader{tx: tx}) })
}

// Has reports whether table holds key.
func (d *DB) Has(table, key string) (bool, error) {
	found := false
	err := d.Read(func(r *Reader) error {
		found = r.Get(table, key) != nil
		return nil
	})
	return found, err
}

// Writer writes records in one transaction.
type Writer struct{ tx *bbolt.Tx }

// Put sets key of table to value.
func (w *Writer) Put(table, key string, value []byte) error {
	b, err := w.tx.CreateBucketIfNotExists([]byte(table))
	if err != nil {
		return fmt.Errorf("table %s: %w", table, err)
	}
	if err := b.Put([]byte(key), value); err != nil {
		return fmt.Errorf("table %s key %q: %w", table, key, err)
	}
	return nil
}

// Get returns key's value in table as this transaction sees it, nil when
// absent; valid only within the transaction.
func (w *Writer) Get(table, key string) []byte {
	b := w.tx.Bucket([]byte(table))
	if b == nil {
		return nil
	}
	return b.Get([]byte(key))
}

// Transaction identifies one transaction: the writes of one group commit
// see the same one, a group retried after a rollback a new one.
type Transaction struct{ tx *bbolt.Tx }

// Transaction is the transaction w writes in.
func (w *Writer) Transaction() Transaction { return Transaction{w.tx} }

// OnCommit calls fn once the transaction is on disk (not when it is
// rolled back).
func (w *Writer) OnCommit(fn func()) { w.tx.OnCommit(fn) }

// Delete removes key from table; an absent key is no error.
func (w *Writer) Delete(table, key string) error {
	b := w.tx.Bucket([]byte(table))
	if b == nil {
		return nil
	}
	if err := b.Delete([]byte(key)); err != nil {
		return fmt.Errorf("table %s key %q: %w", table, key, err)
	}
	return nil
}

// DeletePrefix removes every key of table that starts with prefix.
func (w *Writer) DeletePrefix(table, prefix string) error {
	b := w.tx.Bucket([]byte(table))
	if b == nil {
		return nil
	}
	c := b.Cursor()
	p := []byte(prefix)
	for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, _ = c.Seek(p) {
		if err := c.Delete(); err != nil {
			return fmt.Errorf("table %s key %q: %w", table, k, err)
		}
	}
	return nil
}

// Reader reads records in one transaction.
type Reader struct{ tx *bbolt.Tx }

// Get returns key's value in table, nil when absent; valid only within
// the transaction.
func (r *Reader) Get(table, key string) []byte {
	b := r.tx.Bucket([]byte(table))
	if b == nil {
		return nil
	}
	return b.Get([]byte(key))
}

// Each calls fn on the keys of table that start with prefix, in key
// order, until fn returns an error; key and value are valid only during
// the call.
func (r *Reader) Each(table, prefix string, fn func(key, value []byte) error) error {
	b := r.tx.Bucket([]byte(table))
	if b == nil {
		return nil
	}
	c := b.Cursor()
	p := []byte(prefix)
	for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}

// EachBefore calls fn on the keys of table that start with prefix and
// sort before before ("" for no bound), in descending key order, until
// fn returns an error; key and value are valid only during the call.
func (r *Reader) EachBefore(table, prefix, before string, fn func(key, value []byte) error) error {
	b := r.tx.Bucket([]byte(table))
	if b == nil {
		return nil
	}
	c := b.Cursor()
	p := []byte(prefix)
	upper := []byte(before)
	if before == "" || !bytes.HasPrefix(upper, p) || bytes.Compare(upper, p) < 0 {
		upper = prefixEnd(p)
	}
	var k, v []byte
	if upper == nil {
		k, v = c.Last()
	} else if k, v = c.Seek(upper); k == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	for ; k != nil && bytes.HasPrefix(k, p); k, v = c.Prev() {
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}

// prefixEnd is the least key above every key starting with p; nil when
// there is none (p is all 0xff).
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// Export writes every record of the store to w, from one read
// transaction: a consistent copy, while writes go on.
func (d *DB) Export(w *state.Writer) error {
	return d.db.View(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
			if strings.HasPrefix(string(name), DerivedPrefix) {
				return nil
			}
			return b.ForEach(func(k, v []byte) error {
				return w.Write(state.Record{Table: string(name), Key: string(k), Value: string(v)})
			})
		})
	})
}

// Fill writes recs in (table, key) order, a few thousand a transaction:
// one bbolt transaction that inserts many keys slows down with the square
// of their number. It is for a table an owner derives from its records,
// which it marks complete in a last write of its own.
func (d *DB) Fill(recs []state.Record) error {
	slices.SortFunc(recs, func(a, b state.Record) int {
		return cmp.Or(strings.Compare(a.Table, b.Table), strings.Compare(a.Key, b.Key))
	})
	for len(recs) > 0 {
		chunk := recs[:min(len(recs), 4096)]
		recs = recs[len(chunk):]
		err := d.db.Update(func(tx *bbolt.Tx) error {
			w := &Writer{tx: tx}
			for _, r := range chunk {
				if err := w.Put(r.Table, r.Key, []byte(r.Value)); err != nil {
					return err
				}
			}
			return stamp(tx)
		})
		if err != nil {
			return fmt.Errorf("%s: %w", d.path, err)
		}
	}
	return nil
}

// Source is a stream of records, such as a *state.Reader.
type Source interface {
	// Next returns the next record, or io.EOF after the last.
	Next() (state.Record, error)
	// Line is the number of the line of the record Next returned last.
	Line() int
}

// Import writes every record r reads into the store, in transactions of
// a few thousand records, and returns how many it wrote. It first drops
// the derived tables, which their owners rebuild from the records.
func (d *DB) Import(r Source) (int, error) {
	n := 0
	if err := d.db.Update(dropDerived); err != nil {
		return 0, fmt.Errorf("%s: import: %w", d.path, err)
	}
	for done := false; !done; {
		err := d.db.Update(func(tx *bbolt.Tx) error {
			w := &Writer{tx: tx}
			for range 4096 {
				rec, err := r.Next()
				if err != nil {
					if errors.Is(err, io.EOF) {
						done = true
						return nil
					}
					return err
				}
				if strings.HasPrefix(rec.Table, DerivedPrefix) {
					return fmt.Errorf("line %d: table %s is derived (tables starting with %q are the store's own)", r.Line(), rec.Table, DerivedPrefix)
				}
				if err := w.Put(rec.Table, rec.Key, []byte(rec.Value)); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		if err != nil {
			return n, fmt.Errorf("%s: import: %w", d.path, err)
		}
	}
	return n, nil
}
