package cloudmap

import (
	"context"
	"errors"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	staterec "github.com/tollgate/tollgate/state"
)

// The registry's records leave and enter a store as staterec.Records of
// Table, keyed <scope> NUL <field> (the fields of the Redis hashes, an
// instance's i:<service>:<instance>), beside <scope> NUL #seq and, for an
// account that was a known one, <scope> NUL #known: the embedded store's
// own keys.

// allRecords is every record s holds, as eachRecord names them.
func (s *state) allRecords() map[change]bool {
	all := map[change]bool{}
	for id := range s.Namespaces {
		all[change{kindNamespace, id, ""}] = true
	}
	for id, sv := range s.Services {
		all[change{kindService, id, ""}] = true
		all[change{kindRevision, id, ""}] = true
		for inst := range sv.Instances {
			all[change{kindInstance, id, inst}] = true
		}
	}
	for id := range s.Ops {
		all[change{kindOperation, id, ""}] = true
	}
	for id := range s.Tags {
		all[change{kindTags, id, ""}] = true
	}
	return all
}

// redisPrefixOr is prefix, or the registry's default Redis prefix.
func redisPrefixOr(prefix string) string {
	if prefix == "" {
		return "tollgate:cloudmap:"
	}
	return prefix
}

// ExportRedis writes the registry that Redis holds under prefix (""
// for the default) to w: each account's records are read at one Seq (a
// consistent scope), the scopes one after another.
func ExportRedis(ctx context.Context, client goredis.UniversalClient, prefix string, w *staterec.Writer) error {
	r := newRedisStore(redisConfig{client: client, prefix: redisPrefixOr(prefix)})
	unknown, err := client.HGetAll(ctx, r.budgetKey()).Result()
	if err != nil {
		return storeError("HGETALL budget", err)
	}
	iter := client.Scan(ctx, 0, r.prefix+"{*}:seq", 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		inner := strings.TrimSuffix(strings.TrimPrefix(key, r.prefix+"{"), "}:seq")
		scope := strings.NewReplacer("%7B", "{", "%7D", "}").Replace(inner)
		s, err := r.load(ctx, r.base(scope))
		if err != nil {
			return fmt.Errorf("cloudmap: exporting scope %s: %w", scope, err)
		}
		if err := writeScope(w, scope, s, unknown[scope] == ""); err != nil {
			return err
		}
	}
	if err := iter.Err(); err != nil {
		return storeError("SCAN", err)
	}
	return nil
}

// writeScope writes one scope's records.
func writeScope(w *staterec.Writer, scope string, s *state, known bool) error {
	prefix := scope + "\x00"
	var err error
	s.eachRecord(s.allRecords(), func(_ change, f, v string) {
		if err == nil && v != "" {
			err = w.Write(staterec.Record{Table: Table, Key: prefix + f, Value: v})
		}
	})
	if err == nil {
		err = w.Write(staterec.Record{Table: Table, Key: prefix + boltSeqKey, Value: fmt.Sprint(s.Seq)})
	}
	if err == nil && known {
		err = w.Write(staterec.Record{Table: Table, Key: prefix + boltKnownKey, Value: "1"})
	}
	return err
}

// RedisImporter writes Table's records into Redis, as the Redis store
// keeps them.
type RedisImporter struct {
	store  *redisStore
	scopes map[string]bool // scopes written to; true once known
}

// ErrNotEmpty is wrapped by NewRedisImporter's error when Redis already
// holds a registry under the prefix: an import does not merge.
var ErrNotEmpty = errors.New("cloudmap: Redis already holds a registry")

// NewRedisImporter returns an importer into the registry under prefix
// ("" for the default), which must be empty.
func NewRedisImporter(ctx context.Context, client goredis.UniversalClient, prefix string) (*RedisImporter, error) {
	r := newRedisStore(redisConfig{client: client, prefix: redisPrefixOr(prefix)})
	keys, _, err := client.Scan(ctx, 0, r.prefix+"*", 1000).Result()
	if err != nil {
		return nil, storeError("SCAN", err)
	}
	if len(keys) > 0 {
		return nil, fmt.Errorf("%w under %s (such as %s): import into an empty one", ErrNotEmpty, r.prefix, keys[0])
	}
	return &RedisImporter{store: r, scopes: map[string]bool{}}, nil
}

// Put writes one record of Table.
func (im *RedisImporter) Put(ctx context.Context, rec staterec.Record) error {
	scope, field, ok := strings.Cut(rec.Key, "\x00")
	if !ok || scope == "" || field == "" {
		return fmt.Errorf("cloudmap: record %q: want <scope> NUL <field>", rec.Key)
	}
	base := im.store.base(scope)
	im.scopes[scope] = im.scopes[scope] || field == boltKnownKey
	var err error
	switch {
	case field == boltSeqKey:
		err = im.store.client.Set(ctx, base+"seq", rec.Value, 0).Err()
	case field == boltKnownKey:
	case strings.HasPrefix(field, kindInstance+":"):
		svc, inst, ok := strings.Cut(strings.TrimPrefix(field, kindInstance+":"), ":")
		if !ok {
			return fmt.Errorf("cloudmap: record %q: want i:<service>:<instance>", rec.Key)
		}
		err = im.store.client.HSet(ctx, base+"i:"+svc, inst, rec.Value).Err()
	default:
		if err := applyRecord(newState(), field, rec.Value); err != nil {
			return err
		}
		err = im.store.client.HSet(ctx, base+"rec", field, rec.Value).Err()
	}
	if err != nil {
		return storeError("import", err)
	}
	return nil
}

// Finish sets the shared budget's share of every imported account that
// was not a known one, as the Redis store keeps it.
func (im *RedisImporter) Finish(ctx context.Context) error {
	for scope, known := range im.scopes {
		if known {
			continue
		}
		s, err := im.store.load(ctx, im.store.base(scope))
		if err != nil {
			return fmt.Errorf("cloudmap: reading imported scope %s: %w", scope, err)
		}
		if err := im.store.reserve(ctx, scope, s.size, false, nil); err != nil {
			return err
		}
	}
	return nil
}
