package cloudmap

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// redisStore keeps each scope in Redis as records, so that a change
// writes only what it changed, whatever the registry's size:
//
//	<prefix>{<scope>}:seq      the scope's Seq
//	<prefix>{<scope>}:rec      hash: n:<id> namespace, s:<id> service,
//	                           r:<id> service revision, t:<id> tags,
//	                           o:<id> operation (JSON each)
//	<prefix>{<scope>}:i:<svc>  hash: instance id -> instance JSON
//	<prefix>{<scope>}:log      stream of changes, entry id <Seq>-0
//
// The scope is every key's hash tag, so one scope lives in one Redis
// Cluster slot. A change is one Lua script (commitScript): it checks that
// Seq is still the one the change was computed on, writes the records,
// sets Seq and appends the changed records to the log (trimmed to about
// logLength entries). Each node caches every scope it reads; a read costs
// one GET of Seq while nothing changed, and otherwise reads the log from
// its Seq on (a full reload only when it fell more than the log behind).
// A node's own updates of a scope are serialized, so they conflict only
// with other nodes'.
//
// The scopes of unknown accounts share a budget as in memory (see
// budget), kept in Redis so that every node draws on the same one: the
// hash <prefix>{unknown-accounts} holds each such scope's size and, in
// field "*", their sum. An update reserves its scope's new size there in
// one script (reserveScript) before it commits; a reservation made for a
// commit that then lost its race is set right by the next one, since each
// sets the scope's size outright.
//
// A node's cache is bounded in estimated bytes (cacheBytes): the scopes
// least recently used are forgotten first.
type redisStore struct {
	redisConfig

	mu     sync.Mutex
	scopes map[string]*cached
	lru    list.List // of *cached, most recently used first
	bytes  int64     // estimated bytes of the cached states
}

// redisConfig configures a redisStore.
type redisConfig struct {
	prefix     string
	timeout    time.Duration
	maxStale   time.Duration
	now        func() time.Time
	budget     budget // max and perAccount of the unknown accounts' room
	cacheBytes int64
	client     goredis.UniversalClient
}

const (
	// logLength is about how many changes the log keeps per scope.
	logLength = 2048
	// unknownLogLength is the same for a scope of an unknown account:
	// its log is Redis memory the shared budget does not count.
	unknownLogLength = 64
	// maxUpdateAttempts bounds the optimistic retries of one update.
	maxUpdateAttempts = 50
)

func newRedisStore(cfg redisConfig) *redisStore {
	return &redisStore{redisConfig: cfg, scopes: map[string]*cached{}}
}

var braces = strings.NewReplacer("{", "%7B", "}", "%7D")

func (r *redisStore) base(scope string) string { return r.prefix + "{" + braces.Replace(scope) + "}:" }

// storeError wraps a Redis failure.
func storeError(op string, err error) error { return fmt.Errorf("cloudmap: redis %s: %w", op, err) }

func (r *redisStore) getSeq(ctx context.Context, base string) (int64, error) {
	seq, err := r.client.Get(ctx, base+"seq").Int64()
	if errors.Is(err, goredis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, storeError("GET seq", err)
	}
	return seq, nil
}

// refresh brings c (locked) up to Seq seq of Redis.
func (r *redisStore) refresh(ctx context.Context, base string, c *cached, seq int64) error {
	if c.valid && c.s.Seq == seq {
		return nil
	}
	if c.valid && c.s.Seq < seq {
		ok, err := r.readLog(ctx, base, c.s)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
	}
	s, err := r.load(ctx, base)
	if err != nil {
		return err
	}
	c.s, c.valid = s, true
	return nil
}

func (r *redisStore) view(ctx context.Context, scope string, stale bool, fn func(*state) error) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	base := r.base(scope)
	c := r.cache(scope)
	defer r.account(c) // after c's lock is released
	seq, err := r.getSeq(ctx, base)
	if err == nil {
		c.mu.RLock()
		if c.valid && c.s.Seq == seq {
			c.read.Store(r.now().UnixMilli())
			defer c.mu.RUnlock()
			return fn(c.s)
		}
		c.mu.RUnlock()
		c.mu.Lock()
		defer c.mu.Unlock()
		if err = r.refresh(ctx, base, c, seq); err == nil {
			c.read.Store(r.now().UnixMilli())
			return fn(c.s)
		}
		return r.staleView(c, stale, err, fn)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return r.staleView(c, stale, err, fn)
}

// staleView answers from c (locked) when stale answers are allowed and c
// was confirmed within maxStale; else it returns err.
func (r *redisStore) staleView(c *cached, stale bool, err error, fn func(*state) error) error {
	if !stale || c.s == nil || r.maxStale < 0 || r.now().UnixMilli()-c.read.Load() > r.maxStale.Milliseconds() {
		return err
	}
	return fn(c.s)
}

func (r *redisStore) update(ctx context.Context, scope string, known bool, fn func(*state) error) error {
	base := r.base(scope)
	c := r.cache(scope)
	defer r.account(c)
	queued := time.Now().UnixNano()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.failed.Load() > queued {
		return storeError("update", errors.New("unavailable: an update of this scope failed while this one waited"))
	}
	// The timeout starts once this node's earlier updates of the scope
	// are done: it bounds the Redis calls, not the queue.
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if known && !c.released.Load() {
		// An account becomes known (named in access_keys, or the
		// autoscaler's): what it holds leaves the shared budget.
		if err := r.reserve(ctx, scope, 0, false, nil); err != nil {
			return err
		}
		c.released.Store(true)
	}
	for range maxUpdateAttempts {
		seq, err := r.getSeq(ctx, base)
		if err == nil {
			var done bool
			if done, err = r.try(ctx, base, scope, known, c, seq, fn); !done && err == nil {
				continue // another node changed the scope first
			}
		}
		var ae *apiError
		if err != nil && !errors.As(err, &ae) {
			c.failed.Store(time.Now().UnixNano())
		} else {
			c.failed.Store(0)
		}
		return err
	}
	return errStoreConflict
}

// try runs fn on c brought to seq and commits what it changed; done is
// false when another node changed the scope first. The scope of an
// unknown account draws on the shared budget: fn checks against the sum
// read from Redis, and the scope's new size is reserved there, atomically,
// before the commit.
func (r *redisStore) try(ctx context.Context, base, scope string, known bool, c *cached, seq int64, fn func(*state) error) (done bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := r.refresh(ctx, base, c, seq); err != nil {
		return true, err
	}
	s := c.s
	var b *budget
	if !known {
		sum, own, account, err := r.budgetUsed(ctx, scope)
		if err != nil {
			return true, err
		}
		// The sum, with this scope at its size now (for a scope new to
		// Redis, its own bytes, which it takes if it creates anything),
		// and what the account holds in its other regions.
		b = &budget{used: sum - own + s.size, max: r.budget.max, perAccount: r.budget.perAccount, other: account - own}
		s.budget = b
		defer func() { s.budget = nil }()
	}
	before, size := s.Seq, s.size
	s.dirty = map[change]bool{}
	defer func() { s.dirty = nil }()
	if err := fn(s); err != nil {
		if s.Seq != before {
			c.valid = false // fn changed something before failing
		}
		return true, err
	}
	if s.Seq == before {
		return true, nil
	}
	if b != nil {
		// Only a change that checked for room can be refused for it: one
		// that did not (a deregistration) frees about what it takes.
		if err := r.reserve(ctx, scope, s.size, s.size > size && b.code != "", b); err != nil {
			c.valid = false // s holds a change Redis does not have
			return true, err
		}
	}
	logLen := logLength
	if !known {
		logLen = unknownLogLength
	}
	ok, err := r.commit(ctx, base, before, s, logLen)
	if err != nil || !ok {
		c.valid = false // s holds a change Redis may not have
		return err != nil, err
	}
	c.read.Store(r.now().UnixMilli())
	return true, nil
}

// commitScript applies one change. KEYS: seq, rec, log, then the instance
// hashes. ARGV: the Seq it was computed on, the new Seq, the log length,
// then per record: its log field, the index in KEYS of its hash, its
// field there ("" to delete the whole key) and its value ("" to delete).
// It answers 0, or -1 when Seq moved.
var commitScript = goredis.NewScript(`
if tonumber(redis.call('GET', KEYS[1]) or '0') ~= tonumber(ARGV[1]) then return -1 end
local entry = {'^', ARGV[1]}
for i = 4, #ARGV, 4 do
  local key, field, value = KEYS[tonumber(ARGV[i+1])], ARGV[i+2], ARGV[i+3]
  if field == '' then
    redis.call('DEL', key)
  else
    if value == '' then redis.call('HDEL', key, field) else redis.call('HSET', key, field, value) end
    entry[#entry+1] = ARGV[i]
    entry[#entry+1] = value
  end
end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[3], ARGV[2] .. '-0', unpack(entry))
return 0
`)

// commit writes s's dirty records, computed on Seq before, and keeps about
// logLen changes in the log.
func (r *redisStore) commit(ctx context.Context, base string, before int64, s *state, logLen int) (bool, error) {
	keys := []string{base + "seq", base + "rec", base + "log"}
	index := map[string]int{}
	keyOf := func(k string) string {
		if _, ok := index[k]; !ok {
			keys = append(keys, k)
			index[k] = len(keys)
		}
		return strconv.Itoa(index[k])
	}
	args := []any{before, s.Seq, logLen}
	s.eachRecord(s.dirty, func(ch change, f, v string) {
		if ch.kind == kindInstance {
			args = append(args, f, keyOf(base+"i:"+ch.id), ch.sub, v)
			return
		}
		args = append(args, f, "2", f, v)
		if ch.kind == kindService && v == "" {
			args = append(args, "", keyOf(base+"i:"+ch.id), "", "")
		}
	})
	n, err := commitScript.Run(ctx, r.client, keys, args...).Int()
	if err != nil {
		return false, storeError("commit", err)
	}
	return n == 0, nil
}

// marshal encodes a record; a nil pointer is "" (deleted).
func marshal[T any](v *T) string {
	if v == nil {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("cloudmap: encoding a record: %v", err)) // records are plain data
	}
	return string(b)
}
