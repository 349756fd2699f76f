package servicequotas

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/state"
)

// Service Quotas' records leave and enter a store as state.Records of
// Table, keyed as the embedded store keys them (see Table).

// ExportRedis writes what Redis holds to w: every request with its
// history (status, reason, times, the order of creation and of closing),
// the applied values and the tags. A request changed during the export
// is written as one read of its hash saw it.
func ExportRedis(ctx context.Context, rdb redis.UniversalClient, w *state.Writer) error {
	put := func(key string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return w.Write(state.Record{Table: Table, Key: key, Value: string(b)})
	}
	iter := rdb.Scan(ctx, 0, redisPrefix+"req:*", 1000).Iterator()
	for iter.Next(ctx) {
		id := strings.TrimPrefix(iter.Val(), redisPrefix+"req:")
		f, err := rdb.HGetAll(ctx, iter.Val()).Result()
		if err != nil {
			return storeErr("export request", err)
		}
		if len(f) == 0 {
			continue // forgotten meanwhile
		}
		r := fromHash(id, f)
		if r.Status != StatusPending {
			cs, err := rdb.ZScore(ctx, redisPrefix+"closed:"+r.Account, id).Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				return storeErr("export request", err)
			}
			r.closed = int64(cs)
		}
		if err := put(recReq+id, requestRecord{Request: r, Seq: r.seq, Closed: r.closed}); err != nil {
			return err
		}
	}
	if err := iter.Err(); err != nil {
		return storeErr("export requests", err)
	}
	vals, err := rdb.HGetAll(ctx, redisAppliedKey).Result()
	if err != nil {
		return storeErr("export applied values", err)
	}
	unmapped, err := rdb.SMembers(ctx, redisPrefix+"applied:unmapped").Result()
	if err != nil {
		return storeErr("export applied values", err)
	}
	um := map[string]bool{}
	for _, k := range unmapped {
		um[k] = true
	}
	for k, v := range vals {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("servicequotas: applied value %s = %q: %w", k, v, err)
		}
		if err := put(recApplied+k, appliedRecord{Value: n, Unmapped: um[k]}); err != nil {
			return err
		}
	}
	tags := rdb.Scan(ctx, 0, redisPrefix+"tags:*", 1000).Iterator()
	for tags.Next(ctx) {
		key := strings.TrimPrefix(tags.Val(), redisPrefix+"tags:")
		t, err := rdb.HGetAll(ctx, tags.Val()).Result()
		if err != nil {
			return storeErr("export tags", err)
		}
		isUnmapped, err := rdb.SIsMember(ctx, redisPrefix+"tagged:unmapped", key).Result()
		if err != nil {
			return storeErr("export tags", err)
		}
		if len(t) > 0 {
			if err := put(recTags+key, tagsRecord{Account: accountOf(key), Unmapped: isUnmapped, Tags: t}); err != nil {
				return err
			}
		}
	}
	if err := tags.Err(); err != nil {
		return storeErr("export tags", err)
	}
	for _, c := range [][2]string{{recSeq, redisSeqKey}, {recVersion, redisVersionKey}} {
		v, err := rdb.Get(ctx, c[1]).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return storeErr("export counters", err)
		}
		if err := w.Write(state.Record{Table: Table, Key: c[0], Value: v}); err != nil {
			return err
		}
	}
	return nil
}

// ErrNotEmpty is wrapped by NewRedisImporter's error when Redis already
// holds Service Quotas' state: an import does not merge.
var ErrNotEmpty = errors.New("servicequotas: Redis already holds requests or applied values")

// RedisImporter writes Table's records into Redis with the indexes the
// Redis backend keeps.
type RedisImporter struct{ rdb redis.UniversalClient }

// NewRedisImporter returns an importer into rdb, which must hold no
// Service Quotas state.
func NewRedisImporter(ctx context.Context, rdb redis.UniversalClient) (*RedisImporter, error) {
	keys, _, err := rdb.Scan(ctx, 0, redisPrefix+"*", 1000).Result()
	if err != nil {
		return nil, storeErr("SCAN", err)
	}
	if len(keys) > 0 {
		return nil, fmt.Errorf("%w (such as %s): import into an empty one", ErrNotEmpty, keys[0])
	}
	return &RedisImporter{rdb: rdb}, nil
}

// errRecord is a record Put cannot read.
type errRecord struct {
	key string
	err error
}

func (e *errRecord) Error() string { return fmt.Sprintf("servicequotas: record %q: %v", e.key, e.err) }
func (e *errRecord) Unwrap() error { return e.err }

// Put writes one record of Table, with its indexes, in one transaction.
func (im *RedisImporter) Put(ctx context.Context, rec state.Record) error {
	p := redisPrefix
	bad := func(err error) error { return &errRecord{rec.Key, err} }
	_, err := im.rdb.TxPipelined(ctx, func(pp redis.Pipeliner) error {
		switch k := rec.Key; {
		case k == recSeq || k == recVersion:
			if _, err := strconv.ParseInt(rec.Value, 10, 64); err != nil {
				return bad(err)
			}
			key := redisSeqKey
			if k == recVersion {
				key = redisVersionKey
			}
			pp.Set(ctx, key, rec.Value, 0)
		case strings.HasPrefix(k, recReq):
			var r requestRecord
			if err := json.Unmarshal([]byte(rec.Value), &r); err != nil {
				return bad(err)
			}
			id := strings.TrimPrefix(k, recReq)
			pp.HSet(ctx, p+"req:"+id, "account", r.Account, "region", r.Region, "service", r.ServiceCode, "quota", r.QuotaCode,
				"desired", formatValue(r.DesiredValue), "status", r.Status, "reason", r.Reason, "created", r.Created,
				"updated", r.LastUpdated, "unmapped", bit(r.Unmapped), "seq", r.Seq)
			z := func(key string, score int64) { pp.ZAdd(ctx, key, redis.Z{Score: float64(score), Member: id}) }
			z(p+"acct:"+r.Account, r.Seq)
			z(p+"all", r.Seq)
			if r.Status == StatusPending {
				pp.HSet(ctx, p+"open:"+r.Account, r.openKey(), id)
				z(p+"pending", r.Seq)
				if r.Unmapped {
					z(p+"unmapped:open", r.Seq)
				}
			} else {
				z(p+"closed:"+r.Account, r.Closed)
				if r.Unmapped {
					z(p+"unmapped:closed", r.Closed)
				}
			}
		case strings.HasPrefix(k, recApplied):
			var a appliedRecord
			if err := json.Unmarshal([]byte(rec.Value), &a); err != nil {
				return bad(err)
			}
			key := strings.TrimPrefix(k, recApplied)
			pp.HSet(ctx, redisAppliedKey, key, formatValue(a.Value))
			if a.Unmapped {
				pp.SAdd(ctx, p+"applied:unmapped", key)
			}
		case strings.HasPrefix(k, recTags):
			var t tagsRecord
			if err := json.Unmarshal([]byte(rec.Value), &t); err != nil {
				return bad(err)
			}
			if len(t.Tags) == 0 {
				return nil
			}
			key := strings.TrimPrefix(k, recTags)
			pp.HSet(ctx, p+"tags:"+key, t.Tags)
			pp.SAdd(ctx, p+"tagged:"+t.Account, key)
			if t.Unmapped {
				pp.SAdd(ctx, p+"tagged:unmapped", key)
			}
		default:
			return bad(errors.New("unknown kind"))
		}
		return nil
	})
	var er *errRecord
	if err != nil && !errors.As(err, &er) {
		return storeErr("import", err)
	}
	return err
}
