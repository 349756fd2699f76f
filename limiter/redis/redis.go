// Package redis is a [limiter.Limiter] that keeps bucket state in Redis, so
// that many gateway nodes act as one bucket per key.
//
// # Arithmetic
//
// One Lua script decides every take with exactly the arithmetic of
// [bucket.Limit.TakeAt]: the same decisions, the same remaining tokens,
// retry-after and reset-after to the nanosecond. It reads the time from
// Redis TIME, so gateway clocks never matter. A bucket is one Redis string
// holding its [bucket.State] as a decimal integer of Unix nanoseconds, with
// an expiry at that instant, when the bucket is full again: an idle bucket
// costs Redis no memory. Denied takes and takes of 0 tokens write nothing.
//
// Lua numbers are doubles, exact only below 2^53, so the script works on
// times relative to now. This keeps it exact for every limit whose empty
// bucket refills within 2^52 ns (about 52 days: capacity × interval); the
// store refuses longer limits with [ErrUnsupportedLimit].
//
// # Key layout
//
// The bucket of limiter key k is the Redis key KeyPrefix+k, by default
// "tg:"+k. tollgate's keys carry a hash tag per account, so the bucket of
// ECS cluster reads for account 123456789012 in us-east-1 is
//
//	tg:{ecs/123456789012}:us-east-1:cluster-read
//
// Redis Cluster hashes only the part in braces, so all buckets of one
// account live in one slot, and the takes of one request (which all belong
// to one account) are decided by one script call on one node. Keys without
// a hash tag are hashed whole. KeyPrefix should not contain braces: it would
// become every key's hash tag and put all buckets in one slot.
//
// # Round trips
//
// Takes are queued to a few pipeline goroutines (Options.Pipelines). An
// idle goroutine sends a request at once; while all are busy, requests
// queue up, and the next free goroutine sends everything queued in one
// pipeline. On a single Redis server all takes of a pipeline are decided by
// script calls of up to 128 takes each; on Redis Cluster (or a Ring) takes
// are grouped by hash tag, one script call per group. A batch is therefore
// one round trip, and concurrent single takes share round trips without
// waiting when the store is idle. Scripts are run with EVALSHA and loaded
// with EVAL when a server answers NOSCRIPT (after a restart or failover).
//
// # Failures
//
// A take waits for Redis at least Options.Timeout (50 ms by default), and
// longer while Redis's recent answers are slow: twice the smoothed round
// trip plus four deviations (TCP's retransmission timer), at most
// Options.MaxTimeout (4 × Timeout). A take Redis does not answer in time
// follows Options.FailurePolicy.
//
// [FailLocal] (the default) keeps, for the keys this node decided recently
// (Options.LocalKeys, 100,000, least recently used forgotten first), the
// state Redis last reported, counted from when its answer arrived, plus the
// takes sent and not yet answered and the takes whose pipeline failed (Redis
// may still apply them). A take Redis does not answer in time is decided
// from that view, its own charge counted once, so a slow answer never
// admits what Redis may admit too. Tokens admitted this way are written
// back: the next take of the key sent to Redis is preceded by a charge of
// those tokens (less what refilled since) without a check, up to an empty
// bucket; a take admitted here and then by a late answer is not written
// twice. One node alone therefore never admits more than the bucket
// allows, across stalls and outages of any length. A key this node never
// saw starts as its share of a full bucket. Every local decision is made
// under the node's share of the limit, capacity and refill divided by
// Options.Nodes (the store cannot count nodes while Redis is away; the
// operator or the autoscaler can), so that N nodes, with Nodes ≥ N, admit
// together at most one bucket's worth during an outage; with Nodes < N,
// up to N/Nodes times it.
//
// A stall is not an outage: only breakerFailures (3) pipelines in a row
// that get no answer within MaxTimeout, or whose connection is refused,
// open the breaker. While it is open, takes are decided at once, without
// waiting, and a prober pings Redis every 100 ms; the first answer closes
// it. A script error is an answer: it does not count.
//
// [FailOpen] decides as if the bucket were full, [FailClosed] as if it
// were empty. Decisions by policy are counted in [Stats] (for a metric).
// The first one of an outage logs a warning with its cause at once (of a
// Redis that flaps, the first three outages, then one per
// Options.LogInterval), and while the outage lasts a warning with the count
// follows at most once per interval; the first decision by Redis after a
// logged outage logs that Redis is back and how long it was away.
//
// go-redis writes log lines of its own (failed dials, for instance) to
// standard error, process-wide; [SetClientLogger] sends them to a
// [slog.Logger] instead, throttled like the store's warnings.
//
// [Store.Health] tells a readiness probe whether Redis answers.
//
// Callers get a decision within the timeout whatever the client's own
// timeouts, but a client that ignores contexts keeps a pipeline goroutine
// waiting on a silent server for its ReadTimeout, while later takes queue
// and fall back; clients from [NewClient] honour contexts.
//
// # Deny cache
//
// With Options.DenyCache a store remembers, per key, the latest state Redis
// reported for a bucket left empty, and denies takes of that bucket locally
// until the instant its next token exists, without a round trip. It never
// changes a decision: a take of n ≥ 1 tokens needs at least one token,
// and state only grows while tollgate alone writes the keys. The instant is
// measured on this process's monotonic clock from when the request that
// reported the state was sent, which is no later than when Redis decided,
// and is shortened by 1/1024 of the wait to cover clock rate differences
// (not a step of Redis's clock).
// Locally denied decisions are those Redis would have made, with
// retry-after and reset-after early by at most the round trip. The cache
// assumes only tollgate writes the bucket keys: a key deleted by hand (or
// lost in a failover) may stay denied until its cached instant. During an
// outage the cache still denies the buckets it knows are empty.
package redis

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/limiter"
)

//go:embed take.lua
var takeSource string

var takeScript = goredis.NewScript(takeSource)

// MaxWindow is the longest refill window (capacity × interval) of a limit
// the store accepts: the script's arithmetic is exact within it.
const MaxWindow = time.Duration(1) << 52

// ErrUnsupportedLimit is wrapped, along with [limiter.ErrInvalidRequest], by
// the error for a limit whose empty bucket refills in more than
// [MaxWindow].
var ErrUnsupportedLimit = errors.New("redis: limit refills too slowly for the Redis store")

// ErrClosed is returned by takes on a closed store.
var ErrClosed = errors.New("redis: store closed")

// FailurePolicy says how a store decides when Redis cannot answer.
type FailurePolicy int

const (
	// FailLocal decides from the state Redis last reported for the key,
	// charged with what this node sent or admitted since, under the
	// node's share of the limit (see Failures in the package
	// documentation). It is the default: one node never admits more than
	// the bucket allows, and N nodes with Options.Nodes ≥ N admit together
	// at most one bucket's worth during an outage, where FailOpen admits
	// everything that fits the capacity, however often it is asked.
	FailLocal FailurePolicy = iota
	// FailOpen decides as if the bucket were full: every take that fits
	// the capacity is allowed. A Redis outage (or a slow Redis) then costs
	// all throttling for its duration, but never the availability of an
	// API behind the gateway.
	FailOpen
	// FailClosed decides as if the bucket were empty: every take of one
	// token or more is denied, retry after the time its tokens take to
	// refill.
	FailClosed
)

// String returns "local", "open" or "closed": the words of tollgate's
// --store-on-failure flag and store.on_failure setting.
func (p FailurePolicy) String() string {
	switch p {
	case FailLocal:
		return "local"
	case FailOpen:
		return "open"
	case FailClosed:
		return "closed"
	}
	return "FailurePolicy(" + strconv.Itoa(int(p)) + ")"
}

// ErrInvalidPolicy is wrapped by the error of [ParseFailurePolicy].
var ErrInvalidPolicy = errors.New("redis: invalid failure policy")

// ParseFailurePolicy parses "local", "open" or "closed", the forms
// [FailurePolicy.String] writes and tollgate's flags and config files use,
// or the long forms "fail-local", "fail-open" and "fail-closed".
func ParseFailurePolicy(s string) (FailurePolicy, error) {
	switch s {
	case "fail-local", "local":
		return FailLocal, nil
	case "fail-open", "open":
		return FailOpen, nil
	case "fail-closed", "closed":
		return FailClosed, nil
	}
	return 0, fmt.Errorf("%w %q: want local, open or closed (or fail-local, fail-open, fail-closed)", ErrInvalidPolicy, s)
}

// MarshalText implements [encoding.TextMarshaler] with [FailurePolicy.String].
func (p FailurePolicy) MarshalText() ([]byte, error) {
	if p != FailLocal && p != FailOpen && p != FailClosed {
		return nil, fmt.Errorf("%w: %d", ErrInvalidPolicy, int(p))
	}
	return []byte(p.String()), nil
}

// UnmarshalText implements [encoding.TextUnmarshaler] with
// [ParseFailurePolicy], so config files can name a policy.
func (p *FailurePolicy) UnmarshalText(b []byte) error {
	v, err := ParseFailurePolicy(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// Options configure a Store. The zero value is ready to use.
type Options struct {
	// KeyPrefix is put before every limiter key to make its Redis key;
	// "" means "tg:". It should not contain braces (see Key layout).
	KeyPrefix string
	// Timeout is the least time a take or batch waits for Redis, queueing
	// included, before FailurePolicy decides it; 0 means 50 ms. The store
	// waits longer, up to MaxTimeout, while Redis's recent answers take
	// longer: twice the smoothed round trip plus four deviations (see
	// Failures).
	Timeout time.Duration
	// MaxTimeout is the most a take waits for Redis, however slow its
	// recent answers; 0 means 4 × Timeout. It is also how long a health
	// probe waits.
	MaxTimeout time.Duration
	// Nodes is the number of gateway nodes sharing the store, for
	// FailLocal: while Redis does not answer, each node decides from its
	// share of a bucket, capacity and refill divided by Nodes (see
	// Failures); 0 means 1. Set it to the number of nodes that take
	// from the same keys, or more.
	Nodes int
	// LocalKeys bounds the keys FailLocal remembers Redis's state of
	// (the least recently used are forgotten first); 0 means 100,000.
	LocalKeys int
	// FailurePolicy decides takes Redis cannot answer in time; the zero
	// value is FailLocal.
	FailurePolicy FailurePolicy
	// DenyCache denies takes of buckets known to be empty without asking
	// Redis (see the package documentation).
	DenyCache bool
	// Logger receives the failure warnings; nil means slog.Default().
	Logger *slog.Logger
	// LogInterval is the least time between two warnings about Redis
	// failures (the first of an outage is logged at once unless one was
	// logged within the interval); 0 means 10 s.
	LogInterval time.Duration
	// Pipelines is the number of pipelines in flight at once; 0 means 2.
	// More pipelines help when Redis is far away (a long round trip); on
	// a local network two keep one pipeline filling while the other is in
	// flight (see BENCHMARKS.md).
	Pipelines int
	// Now, for tests only, replaces Redis TIME: when set, every script
	// call is sent the time it returns (which must not be before 1970),
	// and the deny cache runs on it too. Production leaves it nil.
	Now func() time.Time
}

// Stats counts a store's decisions since it was made. All counts only grow.
type Stats struct {
	// Redis counts the decisions made by Redis.
	Redis uint64
	// Cached counts the takes denied locally by the deny cache.
	Cached uint64
	// Fallback counts the decisions made by the failure policy because
	// Redis could not answer in time or the breaker was open (under
	// FailLocal, from the state Redis last reported).
	Fallback uint64
	// Errors counts the script calls that failed: Redis refused or did
	// not answer before the pipeline's deadline, or answered an error. One
	// call decides up to 128 takes. Takes whose callers stopped waiting
	// before their call failed count as Fallback only.
	Errors uint64
}

// Store is a [limiter.Limiter] on Redis, safe for concurrent use. Make one
// with [New] and Close it when done.
type Store struct {
	client   goredis.UniversalClient
	owned    bool // Close closes client too (Open)
	prefix   string
	timeout  time.Duration
	policy   FailurePolicy
	log      *slog.Logger
	logEvery int64
	now      func() time.Time
	epoch    time.Time
	byTag    bool // group script calls by hash tag (Cluster, Ring)
	braces   bool // the prefix has braces: hash tags come from prefix+key
	deny     *denyCache
	shadow   *shadows // FailLocal: the state Redis last reported, per key
	nodes    int64

	// waiting for Redis (breaker.go)
	est      waitEstimator
	wait     atomic.Int64  // a take's wait for Redis now, ns
	maxWait  time.Duration // the most a take or health probe waits
	deadline time.Duration // a pipeline's own deadline
	fails    atomic.Int32  // pipelines in a row that did not reach Redis
	broken   atomic.Bool   // the breaker is open: an outage
	probeNow chan struct{}
	failAt   atomic.Int64 // store clock when a pipeline last failed
	upAt     atomic.Int64 // store clock of the first answer to a pipeline sent after failAt

	queue chan *call
	quit  chan struct{}
	wg    sync.WaitGroup
	close sync.Once
	calls sync.Pool

	redisN, cachedN, fallbackN, errorsN atomic.Uint64

	// failure log state, on the real monotonic clock
	lastLog   atomic.Int64  // when the last warning was logged
	unlogged  atomic.Uint64 // fallback decisions since the last warning
	outages   atomic.Uint64 // outages begun since the last warning
	down      atomic.Bool   // the latest call to Redis failed
	downSince atomic.Int64  // when the current outage began
	logged    atomic.Bool   // the current outage's start was logged

	startLogMu sync.Mutex
	startLog   bucket.State // the bucket of outage-start warnings

	health healthCache
}

var _ limiter.Limiter = (*Store)(nil)

// New returns a store deciding with Redis through client, which it does not
// close. Close the store to stop its pipeline goroutines.
func New(client goredis.UniversalClient, opts Options) *Store {
	s := &Store{
		client:   client,
		prefix:   opts.KeyPrefix,
		timeout:  opts.Timeout,
		policy:   opts.FailurePolicy,
		log:      opts.Logger,
		logEvery: int64(opts.LogInterval),
		now:      opts.Now,
		epoch:    time.Now(),
		queue:    make(chan *call, 1024),
		quit:     make(chan struct{}),
	}
	if s.prefix == "" {
		s.prefix = "tg:"
	}
	s.braces = strings.ContainsAny(s.prefix, "{}")
	if s.timeout <= 0 {
		s.timeout = 50 * time.Millisecond
	}
	s.maxWait = opts.MaxTimeout
	if s.maxWait <= 0 {
		s.maxWait = 4 * s.timeout
	}
	s.maxWait = max(s.maxWait, s.timeout)
	// A pipeline waits for its answer as long as a take may: a late
	// answer still tells the shadow table Redis's state.
	s.deadline = s.maxWait
	s.est.floor, s.est.ceiling = s.timeout, s.maxWait
	s.wait.Store(int64(s.timeout))
	s.probeNow = make(chan struct{}, 1)
	s.nodes = int64(max(opts.Nodes, 1))
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.logEvery <= 0 {
		s.logEvery = int64(10 * time.Second)
	}
	s.lastLog.Store(-s.logEvery)
	if opts.DenyCache {
		s.deny = newDenyCache()
	}
	if s.policy == FailLocal {
		keys := opts.LocalKeys
		if keys <= 0 {
			keys = 100_000
		}
		s.shadow = newShadows(keys, opts.Nodes)
	}
	switch client.(type) {
	case *goredis.Client:
	default:
		s.byTag = true
	}
	n := opts.Pipelines
	if n <= 0 {
		n = 2
	}
	s.wg.Add(n + 1)
	for range n {
		go s.work()
	}
	go s.probe()
	return s
}

// Open returns a store on a new client for a store URL (see [NewClient]),
// which the store closes in Close. It does not connect: see [Store.Ping].
func Open(rawURL string, opts Options) (*Store, error) {
	client, err := NewClient(rawURL)
	if err != nil {
		return nil, err
	}
	s := New(client, opts)
	s.owned = true
	return s, nil
}

// Ping checks that Redis answers, loading the store's script on every node
// (so that the first takes need no NOSCRIPT round). It is for start-up
// checks and health probes; takes do not need it.
func (s *Store) Ping(ctx context.Context) error {
	if err := takeScript.Load(ctx, s.client).Err(); err != nil {
		return fmt.Errorf("redis store: %w", err)
	}
	return nil
}

// Close stops the store's pipeline goroutines, once the pipelines in flight
// end. Takes after Close return ErrClosed; takes in flight are decided by
// the failure policy. It closes the client only if the store made it
// (Open).
func (s *Store) Close() error {
	var err error
	s.close.Do(func() {
		close(s.quit)
		s.wg.Wait()
		if s.owned {
			err = s.client.Close()
		}
	})
	return err
}

// Key returns the Redis key holding the bucket of limiter key key.
func (s *Store) Key(key string) string { return s.prefix + key }

// FailurePolicy returns how the store decides takes Redis cannot answer.
func (s *Store) FailurePolicy() FailurePolicy { return s.policy }

// Stats returns the store's decision counts, for metrics.
func (s *Store) Stats() Stats {
	return Stats{
		Redis:    s.redisN.Load(),
		Cached:   s.cachedN.Load(),
		Fallback: s.fallbackN.Load(),
		Errors:   s.errorsN.Load(),
	}
}

// clock is the time the deny cache runs on: the test clock, or this
// process's monotonic clock.
func (s *Store) clock() int64 {
	if s.now != nil {
		return s.now().UnixNano()
	}
	return int64(time.Since(s.epoch))
}

// CheckWindow reports whether the store can hold limit: it refuses, with
// an error wrapping [ErrUnsupportedLimit], a limit whose empty bucket
// refills in more than MaxWindow, the bound take.lua also applies to the
// states it reads. Take and TakeBatch refuse such limits the same way; a
// config checks its limits with it before it is served.
func CheckWindow(limit bucket.Limit) error {
	iv := limit.Interval()
	if iv <= 0 {
		return nil // the zero limit, refused by limiter.Check
	}
	if iv > MaxWindow || limit.Capacity() > int64(MaxWindow/iv) {
		return fmt.Errorf("%w: %w: %v refills in %v, more than %v", limiter.ErrInvalidRequest, ErrUnsupportedLimit, limit,
			time.Duration(float64(limit.Capacity())*float64(iv)).Round(time.Second), MaxWindow)
	}
	return nil
}

// Take implements [limiter.Limiter]. When Redis cannot answer within the
// store's timeout, the decision follows its failure policy and the error is
// nil. A take larger than the capacity returns its denied decision and an
// error wrapping [bucket.ErrExceedsCapacity]; any other error means the
// request was invalid, ctx ended, or the store is closed, and comes with the
// zero Decision.
func (s *Store) Take(ctx context.Context, key string, limit bucket.Limit, n int64) (bucket.Decision, error) {
	check := limiter.Check(limit, n)
	if check != nil && !errors.Is(check, bucket.ErrExceedsCapacity) {
		return bucket.Decision{}, check
	}
	if err := CheckWindow(limit); err != nil {
		return bucket.Decision{}, err
	}
	if s.deny != nil {
		if d, ok := s.deny.lookup(key, limit, n, s.clock()); ok {
			s.cachedN.Add(1)
			return d, nil
		}
	}
	if s.open() {
		if err := s.closed(); err != nil {
			return bucket.Decision{}, err
		}
		return s.failFast(key, limit, n), check
	}
	c := s.getCall()
	var ent *shadowEntry
	var wb int64
	if s.shadow != nil {
		ent, wb = s.shadow.send(key, limit, n, s.clock())
		if wb > 0 {
			c.reqs = append(c.reqs, limiter.Request{Key: key, Limit: limit, Tokens: -wb})
			c.ents = append(c.ents, ent)
		}
		c.ents = append(c.ents, ent)
	}
	c.reqs = append(c.reqs, limiter.Request{Key: key, Limit: limit, Tokens: n})
	j := len(c.reqs) - 1
	st, err := s.do(ctx, c)
	if st == notQueued && ent != nil {
		ent.unsend(limit, n, wb, s.clock())
	}
	if err != nil {
		return bucket.Decision{}, err
	}
	switch st {
	case notQueued:
		return s.timedOut(key, limit, n, ent, nil), check
	case late:
		var fate *uint8
		if ent != nil {
			fate = &c.fate[j]
		}
		return s.timedOut(key, limit, n, ent, fate), check
	}
	d := s.finish(c, j)
	s.putCall(c)
	return d, check
}

// closed returns ErrClosed once the store is closed.
func (s *Store) closed() error {
	select {
	case <-s.quit:
		return ErrClosed
	default:
		return nil
	}
}

// TakeBatch implements [limiter.Limiter], deciding the whole batch in one
// round trip. Items Redis cannot answer in time follow the failure policy.
// An error means the batch was invalid, ctx ended, or the store is closed;
// when ctx ends, Redis may still apply the takes.
func (s *Store) TakeBatch(ctx context.Context, reqs []limiter.Request, out []bucket.Decision) error {
	if err := limiter.CheckBatch(reqs, out); err != nil {
		return err
	}
	for _, r := range reqs {
		if err := CheckWindow(r.Limit); err != nil {
			return err
		}
	}
	if len(reqs) == 0 {
		return nil
	}
	broken := s.open()
	if broken {
		if err := s.closed(); err != nil {
			return err
		}
	}
	var now int64
	if s.deny != nil || s.shadow != nil {
		now = s.clock()
	}
	c := s.getCall()
	for i, r := range reqs {
		if s.deny != nil {
			if d, ok := s.deny.lookup(r.Key, r.Limit, r.Tokens, now); ok {
				s.cachedN.Add(1)
				out[i] = d
				continue
			}
		}
		if broken {
			out[i] = s.failFast(r.Key, r.Limit, r.Tokens)
			continue
		}
		if s.shadow != nil {
			ent, wb := s.shadow.send(r.Key, r.Limit, r.Tokens, now)
			if wb > 0 {
				c.reqs = append(c.reqs, limiter.Request{Key: r.Key, Limit: r.Limit, Tokens: -wb})
				c.pos = append(c.pos, -1)
				c.ents = append(c.ents, ent)
			}
			c.ents = append(c.ents, ent)
		}
		c.reqs = append(c.reqs, r)
		c.pos = append(c.pos, i)
	}
	if len(c.reqs) == 0 {
		s.putCall(c)
		return nil
	}
	st, err := s.do(ctx, c)
	if st == answered {
		for j, i := range c.pos {
			if i >= 0 {
				out[i] = s.finish(c, j)
			}
		}
		s.putCall(c)
		return nil
	}
	if st == notQueued && s.shadow != nil {
		now := s.clock()
		for j, r := range c.reqs {
			if r.Tokens < 0 {
				c.ents[j].unsend(r.Limit, 0, -r.Tokens, now)
			} else {
				c.ents[j].unsend(r.Limit, r.Tokens, 0, now)
			}
		}
	}
	if err != nil {
		return err
	}
	for j, i := range c.pos {
		if i < 0 {
			continue // a write-back
		}
		r := c.reqs[j]
		var ent *shadowEntry
		var fate *uint8
		if s.shadow != nil {
			ent = c.ents[j]
			if st == late {
				fate = &c.fate[j]
			}
		}
		out[i] = s.timedOut(r.Key, r.Limit, r.Tokens, ent, fate)
	}
	return nil
}

// finish returns the decision of take j of a completed call: Redis's,
// remembered by the deny cache, or the failure policy's.
func (s *Store) finish(c *call, j int) bucket.Decision {
	r := c.reqs[j]
	if c.ok[j] {
		d := c.out[j]
		s.redisN.Add(1)
		if s.deny != nil && d.Remaining <= 0 {
			s.deny.store(r.Key, c.sent+int64(d.ResetAfter), c.sent)
		}
		return d
	}
	s.fallbackN.Add(1)
	s.noteDown(c.err)
	var ent *shadowEntry
	var fate *uint8
	if s.shadow != nil {
		ent, fate = c.ents[j], &c.fate[j]
	}
	return s.fallback(r.Key, r.Limit, r.Tokens, ent, fate)
}

// errTimeout is the logged cause of takes Redis did not answer in time.
var errTimeout = fmt.Errorf("no answer from redis in time: %w", context.DeadlineExceeded)

// errOutage is the logged cause of takes decided while the breaker is open.
var errOutage = errors.New("redis store in an outage: pipelines failed in a row, probing")

// timedOut is the decision of a take Redis did not answer in time; ent
// and fate are its shadow entry and fate (nil if it was never sent).
func (s *Store) timedOut(key string, limit bucket.Limit, n int64, ent *shadowEntry, fate *uint8) bucket.Decision {
	s.fallbackN.Add(1)
	s.noteDown(errTimeout)
	return s.fallback(key, limit, n, ent, fate)
}

// failFast is the decision of a take while the breaker is open.
func (s *Store) failFast(key string, limit bucket.Limit, n int64) bucket.Decision {
	s.fallbackN.Add(1)
	s.noteDown(errOutage)
	return s.fallback(key, limit, n, nil, nil)
}

// fallback is the decision of the failure policy: from what Redis last
// said of key (FailLocal), of a full bucket (FailOpen) or of an empty one
// (FailClosed).
func (s *Store) fallback(key string, limit bucket.Limit, n int64, ent *shadowEntry, fate *uint8) bucket.Decision {
	if s.shadow != nil {
		return s.shadow.decide(key, ent, limit, share(limit, s.nodes), n, fate, s.clock())
	}
	var st bucket.State
	if s.policy == FailClosed {
		st = bucket.State(limit.Capacity() * int64(limit.Interval()))
	}
	_, d := limit.TakeAt(st, 0, n)
	return d
}

// startLogBurst is how many outages in a row may log their start at once;
// beyond it, one more per log interval (a flapping Redis).
const startLogBurst = 3

// noteDown records a fallback decision. The first of an outage begins it
// and is logged at once, unless startLogBurst outage starts were logged
// lately (a flapping Redis): then its warning waits for the log interval.
// Later decisions are logged at most once per interval, with their count.
func (s *Store) noteDown(cause error) {
	s.unlogged.Add(1)
	now := int64(time.Since(s.epoch))
	if s.down.CompareAndSwap(false, true) {
		s.downSince.Store(now)
		s.logged.Store(false)
		s.outages.Add(1)
		if s.startLogAllowed(now) {
			s.lastLog.Store(now)
			s.warn(now, cause)
			return
		}
	}
	last := s.lastLog.Load()
	if now-last < s.logEvery || !s.lastLog.CompareAndSwap(last, now) {
		return
	}
	s.warn(now, cause)
}

// startLogAllowed takes a token from the bucket of outage-start warnings:
// startLogBurst at once, refilled one per log interval.
func (s *Store) startLogAllowed(now int64) bool {
	s.startLogMu.Lock()
	defer s.startLogMu.Unlock()
	limit, err := bucket.NewLimit(startLogBurst, float64(time.Second)/float64(s.logEvery))
	if err != nil {
		return true // an interval too long for a bucket: log every start
	}
	next, d := limit.TakeAt(s.startLog, now, 1)
	s.startLog = next
	return d.Allowed
}

// warn logs that Redis is unavailable, with what happened since the last
// warning.
func (s *Store) warn(now int64, cause error) {
	if s.down.Load() {
		s.logged.Store(true)
	}
	s.log.Warn("redis store unavailable, deciding by failure policy",
		"policy", s.policy.String(),
		"decisions", s.unlogged.Swap(0),
		"outages", s.outages.Swap(0),
		"down_for", time.Duration(now-s.downSince.Load()).Round(time.Millisecond),
		"timeout", time.Duration(s.wait.Load()),
		"error", cause)
}

// noteUp ends an outage, and logs its end if its start was logged, when
// Redis answered a pipeline sent at sentAt (time since s.epoch). An answer
// to a pipeline sent before the outage began does not end it: a caller
// that gave up waiting for that very pipeline may be what began it.
func (s *Store) noteUp(sentAt int64) {
	if !s.down.Load() || sentAt < s.downSince.Load() || !s.down.CompareAndSwap(true, false) {
		return
	}
	if !s.logged.Swap(false) {
		return
	}
	s.log.Info("redis store available again",
		"outage", time.Duration(int64(time.Since(s.epoch))-s.downSince.Load()).Round(time.Millisecond),
		"policy", s.policy.String())
}
