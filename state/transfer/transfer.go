// Package transfer moves tollgate's durable state between stores: it
// exports the embedded store (state/bolt) or Redis as a stream of
// state.Records and imports such a stream into either, so that a backup
// can be restored, and a single node's registry and quota history can
// move to Redis when it grows to several nodes (and back).
//
// It owns no state of its own: the Cloud Map registry and Service Quotas
// say how their records are kept in Redis (cloudmap.ExportRedis,
// servicequotas.ExportRedis and their importers); the embedded store
// keeps the records as they are.
//
// # Lifecycle
//
// ExportBolt, ExportDB or ExportRedis write a stream; ImportBolt or
// ImportRedis read one, into an empty store (an import never merges).
package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/cloudmap"
	"github.com/tollgate/tollgate/servicequotas"
	"github.com/tollgate/tollgate/state"
	"github.com/tollgate/tollgate/state/bolt"
)

// ErrNotEmpty is wrapped by an import's error when the store already
// holds state.
var ErrNotEmpty = errors.New("the store already holds state; import into an empty one")

// tables are the tables an export holds.
var tables = []string{cloudmap.Table, servicequotas.Table, state.RevisionsTable}

// RedisRevisionsKey is the Redis hash that holds the revisions table in
// Redis (field: the service's name, value: the record's), so that an
// export through Redis keeps the autoscaled services' revisions and
// admin traffic; nodes on Redis read and write it as their revisions
// table.
const RedisRevisionsKey = "tollgate:revisions"

// ExportDB writes every record of an open embedded store to w, from one
// read transaction: a consistent copy, also while it serves.
func ExportDB(db *bolt.DB, w io.Writer) error {
	sw, err := state.NewWriter(w)
	if err != nil {
		return err
	}
	if err := db.Export(sw); err != nil {
		return fmt.Errorf("%s: export: %w", db.Path(), err)
	}
	return sw.Flush()
}

// ExportBolt writes the embedded store in dir to w. It opens the file
// for reading, which a tollgate serving from it does not allow: export
// that one through its admin API (GET /v1/admin/state/export).
func ExportBolt(dir string, w io.Writer) error {
	db, err := bolt.Open(dir, bolt.Options{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("%w (a tollgate serving from it exports it at GET /v1/admin/state/export)", err)
	}
	defer db.Close()
	return ExportDB(db, w)
}

// ExportRedis writes the state Redis holds to w.
func ExportRedis(ctx context.Context, client goredis.UniversalClient, w io.Writer) error {
	sw, err := state.NewWriter(w)
	if err != nil {
		return err
	}
	if err := cloudmap.ExportRedis(ctx, client, "", sw); err != nil {
		return err
	}
	if err := servicequotas.ExportRedis(ctx, client, sw); err != nil {
		return err
	}
	revs, err := client.HGetAll(ctx, RedisRevisionsKey).Result()
	if err != nil {
		return fmt.Errorf("redis: reading %s: %w", RedisRevisionsKey, err)
	}
	names := make([]string, 0, len(revs))
	for name := range revs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := sw.Write(state.Record{Table: state.RevisionsTable, Key: name, Value: revs[name]}); err != nil {
			return err
		}
	}
	return sw.Flush()
}

// ImportBolt reads a stream from r into the embedded store in dir, which
// must hold no records; it returns how many it wrote.
func ImportBolt(dir string, r io.Reader) (int, error) {
	sr, err := state.NewReader(r)
	if err != nil {
		return 0, err
	}
	db, err := bolt.Open(dir, bolt.Options{})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	empty := true
	if err := db.Read(func(rd *bolt.Reader) error {
		for _, t := range tables {
			_ = rd.Each(t, "", func(_, _ []byte) error { empty = false; return io.EOF })
		}
		return nil
	}); err != nil {
		return 0, err
	}
	if !empty {
		return 0, fmt.Errorf("%s: %w", db.Path(), ErrNotEmpty)
	}
	n, err := db.Import(&checked{sr})
	if err != nil {
		return n, err
	}
	return n, nil
}

// checked refuses the records of a table no part of tollgate owns.
type checked struct{ *state.Reader }

func (c *checked) Next() (state.Record, error) {
	rec, err := c.Reader.Next()
	if err == nil && !slices.Contains(tables, rec.Table) {
		return rec, fmt.Errorf("line %d: table %q is none of %v", c.Line(), rec.Table, tables)
	}
	return rec, err
}

// ImportRedis reads a stream from r into Redis, which must hold no
// registry and no Service Quotas state; it returns how many records it
// wrote.
func ImportRedis(ctx context.Context, client goredis.UniversalClient, r io.Reader) (int, error) {
	sr, err := state.NewReader(r)
	if err != nil {
		return 0, err
	}
	cm, err := cloudmap.NewRedisImporter(ctx, client, "")
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrNotEmpty, err)
	}
	sq, err := servicequotas.NewRedisImporter(ctx, client)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrNotEmpty, err)
	}
	if n, err := client.Exists(ctx, RedisRevisionsKey).Result(); err != nil || n > 0 {
		return 0, fmt.Errorf("%w: %s holds revisions (%v)", ErrNotEmpty, RedisRevisionsKey, err)
	}
	n := 0
	for {
		rec, err := sr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return n, err
		}
		switch rec.Table {
		case cloudmap.Table:
			err = cm.Put(ctx, rec)
		case servicequotas.Table:
			err = sq.Put(ctx, rec)
		case state.RevisionsTable:
			err = client.HSet(ctx, RedisRevisionsKey, rec.Key, rec.Value).Err()
		default:
			err = fmt.Errorf("table %q is none of %v", rec.Table, tables)
		}
		if err != nil {
			return n, fmt.Errorf("line %d: %w", sr.Line(), err)
		}
		n++
	}
	return n, cm.Finish(ctx)
}
