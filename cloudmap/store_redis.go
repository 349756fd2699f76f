package cloudmap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
type redisStore struct {
	client   goredis.UniversalClient
	prefix   string
	timeout  time.Duration
	maxStale time.Duration
	now      func() time.Time

	mu     sync.Mutex
	scopes map[string]*cached
}

// cached is one node's copy of a scope.
type cached struct {
	wmu   sync.Mutex   // held by an update of this node from refresh to commit
	mu    sync.RWMutex // guards s and valid
	s     *state       // nil until first read
	valid bool         // s is the state at s.Seq in Redis
	read  atomic.Int64 // Unix ms when Redis last confirmed s
	// failed is when (wall clock, Unix ns) an update last failed to reach
	// Redis, 0 after a success: updates that were queued behind a failing
	// one fail at once instead of each waiting out the timeout.
	failed atomic.Int64
}

const (
	// logLength is about how many changes the log keeps per scope.
	logLength = 2048
	// maxCachedScopes bounds the scopes a node caches.
	maxCachedScopes = 4096
	// maxUpdateAttempts bounds the optimistic retries of one update.
	maxUpdateAttempts = 50
)

func newRedisStore(c goredis.UniversalClient, prefix string, timeout, maxStale time.Duration, now func() time.Time) *redisStore {
	return &redisStore{client: c, prefix: prefix, timeout: timeout, maxStale: maxStale, now: now, scopes: map[string]*cached{}}
}

var braces = strings.NewReplacer("{", "%7B", "}", "%7D")

func (r *redisStore) base(scope string) string { return r.prefix + "{" + braces.Replace(scope) + "}:" }

func (r *redisStore) cache(scope string) *cached {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.scopes[scope]
	if c == nil {
		if len(r.scopes) >= maxCachedScopes {
			for k := range r.scopes { // forget any one
				delete(r.scopes, k)
				break
			}
		}
		c = &cached{}
		r.scopes[scope] = c
	}
	return c
}

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

// readLog applies the log's entries after s.Seq to s. It reports false,
// leaving s as it was, when the log no longer holds them all.
func (r *redisStore) readLog(ctx context.Context, base string, s *state) (bool, error) {
	entries, err := r.client.XRange(ctx, base+"log", strconv.FormatInt(s.Seq+1, 10), "+").Result()
	if err != nil {
		return false, storeError("XRANGE log", err)
	}
	prev := s.Seq
	for _, e := range entries {
		if p, _ := e.Values["^"].(string); p != strconv.FormatInt(prev, 10) {
			return false, nil // trimmed past s.Seq, or a gap
		}
		seq, err := strconv.ParseInt(strings.TrimSuffix(e.ID, "-0"), 10, 64)
		if err != nil {
			return false, nil
		}
		prev = seq
	}
	if len(entries) == 0 {
		return false, nil
	}
	for _, e := range entries {
		for f, v := range e.Values {
			if f == "^" {
				continue
			}
			sv, _ := v.(string)
			if err := applyRecord(s, f, sv); err != nil {
				return false, err
			}
		}
	}
	s.Seq = prev
	s.OpOrder = slices.DeleteFunc(s.OpOrder, func(id string) bool { return s.Ops[id] == nil })
	return true, nil
}

// applyRecord sets the record named f (a rec field, or i:<svc>:<id>) to
// its JSON v; "" deletes it.
func applyRecord(s *state, f, v string) error {
	kind, id, ok := strings.Cut(f, ":")
	if !ok {
		return fmt.Errorf("cloudmap: redis record %q: no kind", f)
	}
	bad := func(err error) error { return fmt.Errorf("cloudmap: redis record %s: %w", f, err) }
	switch kind {
	case kindNamespace:
		if v == "" {
			delete(s.Namespaces, id)
			return nil
		}
		ns := &namespace{}
		if err := json.Unmarshal([]byte(v), ns); err != nil {
			return bad(err)
		}
		s.Namespaces[id] = ns
	case kindService:
		if v == "" {
			delete(s.Services, id)
			return nil
		}
		sv := &service{}
		if err := json.Unmarshal([]byte(v), sv); err != nil {
			return bad(err)
		}
		if old := s.Services[id]; old != nil {
			sv.Instances, sv.Revision = old.Instances, old.Revision
		} else {
			sv.Instances = map[string]*instance{}
		}
		s.Services[id] = sv
	case kindRevision:
		if sv := s.Services[id]; sv != nil && v != "" {
			rev, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return bad(err)
			}
			sv.Revision = rev
		}
	case kindInstance:
		svcID, instID, _ := strings.Cut(id, ":")
		sv := s.Services[svcID]
		if sv == nil {
			return nil
		}
		if old := sv.Instances[instID]; old != nil && old.RequestID != "" {
			delete(s.reqs, old.RequestID)
		}
		if v == "" {
			delete(sv.Instances, instID)
			return nil
		}
		in := &instance{}
		if err := json.Unmarshal([]byte(v), in); err != nil {
			return bad(err)
		}
		sv.Instances[instID] = in
		if in.RequestID != "" {
			s.reqs[in.RequestID] = reqRef{svcID, instID}
		}
	case kindOperation:
		if v == "" {
			delete(s.Ops, id)
			return nil
		}
		op := &operation{}
		if err := json.Unmarshal([]byte(v), op); err != nil {
			return bad(err)
		}
		if s.Ops[id] == nil {
			s.OpOrder = append(s.OpOrder, id)
		}
		s.Ops[id] = op
	case kindTags:
		if v == "" {
			delete(s.Tags, id)
			return nil
		}
		var tags []tagJSON
		if err := json.Unmarshal([]byte(v), &tags); err != nil {
			return bad(err)
		}
		s.Tags[id] = tags
	default:
		return fmt.Errorf("cloudmap: redis record %q: unknown kind", f)
	}
	return nil
}

// load reads a scope whole: its records, then the instances of its
// services, both at one Seq.
func (r *redisStore) load(ctx context.Context, base string) (*state, error) {
	for range maxUpdateAttempts {
		var seq1 *goredis.StringCmd
		var rec *goredis.MapStringStringCmd
		if _, err := r.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			seq1 = p.Get(ctx, base+"seq")
			rec = p.HGetAll(ctx, base+"rec")
			return nil
		}); err != nil && !errors.Is(err, goredis.Nil) {
			return nil, storeError("load", err)
		}
		s := newState()
		for f, v := range rec.Val() {
			if err := applyRecord(s, f, v); err != nil {
				return nil, err
			}
		}
		ids := slices.Sorted(func(yield func(string) bool) {
			for id := range s.Services {
				if !yield(id) {
					return
				}
			}
		})
		var seq2 *goredis.StringCmd
		insts := make([]*goredis.MapStringStringCmd, len(ids))
		if _, err := r.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			seq2 = p.Get(ctx, base+"seq")
			for i, id := range ids {
				insts[i] = p.HGetAll(ctx, base+"i:"+id)
			}
			return nil
		}); err != nil && !errors.Is(err, goredis.Nil) {
			return nil, storeError("load", err)
		}
		if seq1.Val() != seq2.Val() {
			continue // changed in between
		}
		for i, id := range ids {
			for instID, v := range insts[i].Val() {
				if err := applyRecord(s, kindInstance+":"+id+":"+instID, v); err != nil {
					return nil, err
				}
			}
		}
		if v := seq1.Val(); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("cloudmap: redis seq %q: %w", v, err)
			}
			s.Seq = n
		}
		s.reindex()
		return s, nil
	}
	return nil, errStoreConflict
}

func (r *redisStore) view(ctx context.Context, scope string, stale bool, fn func(*state) error) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	base := r.base(scope)
	c := r.cache(scope)
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

func (r *redisStore) update(ctx context.Context, scope string, _ bool, fn func(*state) error) error {
	base := r.base(scope)
	c := r.cache(scope)
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
	for range maxUpdateAttempts {
		seq, err := r.getSeq(ctx, base)
		if err == nil {
			var done bool
			if done, err = r.try(ctx, base, c, seq, fn); !done && err == nil {
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
// false when another node changed the scope first.
func (r *redisStore) try(ctx context.Context, base string, c *cached, seq int64, fn func(*state) error) (done bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := r.refresh(ctx, base, c, seq); err != nil {
		return true, err
	}
	s := c.s
	before := s.Seq
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
	ok, err := r.commit(ctx, base, before, s)
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

// commit writes s's dirty records, computed on Seq before.
func (r *redisStore) commit(ctx context.Context, base string, before int64, s *state) (bool, error) {
	keys := []string{base + "seq", base + "rec", base + "log"}
	index := map[string]int{}
	keyOf := func(k string) string {
		if _, ok := index[k]; !ok {
			keys = append(keys, k)
			index[k] = len(keys)
		}
		return strconv.Itoa(index[k])
	}
	args := []any{before, s.Seq, logLength}
	rec := func(field, value string) { args = append(args, field, "2", field, value) }
	for ch := range s.dirty {
		f := ch.kind + ":" + ch.id
		switch ch.kind {
		case kindNamespace:
			rec(f, marshal(s.Namespaces[ch.id]))
		case kindService:
			sv := s.Services[ch.id]
			rec(f, marshal(sv))
			if sv == nil {
				args = append(args, "", keyOf(base+"i:"+ch.id), "", "")
			}
		case kindRevision:
			v := ""
			if sv := s.Services[ch.id]; sv != nil {
				v = strconv.FormatInt(sv.Revision, 10)
			}
			rec(f, v)
		case kindInstance:
			sv := s.Services[ch.id]
			if sv == nil {
				continue
			}
			args = append(args, f+":"+ch.sub, keyOf(base+"i:"+ch.id), ch.sub, marshal(sv.Instances[ch.sub]))
		case kindOperation:
			rec(f, marshal(s.Ops[ch.id]))
		case kindTags:
			v := ""
			if t := s.Tags[ch.id]; len(t) > 0 {
				v = marshal(&t)
			}
			rec(f, v)
		}
	}
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
