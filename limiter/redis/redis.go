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
// idle goroutine sends a request as soon as the goroutines already ready
// to run have had their turn (it yields the processor, up to three times
// while that brings more takes; no timer), so that takes arriving
// together share a round trip; while all are busy, requests queue up, and
// the next free goroutine sends everything queued in one pipeline. On a single Redis server all takes of a pipeline are decided by
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
// under the node's share of the limit, capacity and refill divided by the
// number of nodes sharing Redis, so that N nodes admit together at most
// one bucket's worth during an outage. [Store.Run] counts them: each node
// announces itself every NodeTTL/3 in one sorted set (key prefix +
// "nodes", scores the instants the announcements expire, on Redis's
// clock), and one script call adds the node, removes the expired and
// counts the rest. A local decision divides by the highest count read
// within the last NodeTTL (so a Redis restarted empty, or an outage
// longer than the TTL, does not lower it before the nodes announce
// again). Options.Nodes, when set, wins over the count; with Nodes < N,
// N nodes admit up to N/Nodes times a bucket's worth. A store that has
// not read a count (Run not yet answered, or a node started while Redis
// is unreachable) cannot know its share: it decides as [FailClosed] does
// until it has counted, and [Store.Health] reports it not ready, so that
// a node started in an outage never decides from a whole bucket. Run's
// announcements wait for Redis at least two seconds, whatever the take
// timeout, so a short timeout never leaves a node uncounted.
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
// logged outage logs that Redis is back and how long it was away. A
// pipeline sent before an outage ended that fails after it (its dial
// retried while Redis was away) is that outage's: it begins no new one.
//
// go-redis writes log lines of its own (failed dials, for instance) to
// standard error, process-wide; [SetClientLogger] sends them to a
// [slog.Logger] instead, throttled like the store's warnings.
//
// [Store.Health] tells a readiness probe whether Redis answers; a store
// that has never reached Redis is not ready unless its policy is FailOpen,
// and Run logs an error about it every Options.LogInterval.
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
	"crypto/tls"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
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

// MinTimeout is the least Options.Timeout [Open] accepts: below a
// millisecond a Redis round trip (a network hop, a Lua call, a scheduler's
// turn on a loaded machine) is not dependably answered, and every take
// would be decided by the failure policy. [Store.RoundTrip] measures the
// round trip itself, for a start-up check against a farther Redis.
const MinTimeout = time.Millisecond

// ErrTimeoutTooShort is wrapped by the errors for a take timeout shorter
// than a Redis round trip can take.
var ErrTimeoutTooShort = errors.New("redis: store timeout shorter than a round trip to Redis")

// ErrClosed is returned by takes on a closed store.
var ErrClosed = errors.New("redis: store closed")

// Options configure a Store. The zero value is ready to use.
type Options struct {
	// KeyPrefix is put before every limiter key to make its Redis key;
	// "" means "tg:". It should not contain braces (see Key layout).
	KeyPrefix string
	// Timeout is the least time a take or batch waits for Redis, queueing
	// included, before FailurePolicy decides it; 0 means 50 ms. [Open]
	// refuses one below [MinTimeout]. The store
	// waits longer, up to MaxTimeout, while Redis's recent answers take
	// longer: twice the smoothed round trip plus four deviations (see
	// Failures).
	Timeout time.Duration
	// MaxTimeout is the most a take waits for Redis, however slow its
	// recent answers; 0 means 4 × Timeout. It is also how long a health
	// probe waits.
	MaxTimeout time.Duration
	// Nodes, when set, is the number of gateway nodes sharing the store,
	// for FailLocal: while Redis does not answer, each node decides from
	// its share of a bucket, capacity and refill divided by Nodes (see
	// Failures). 0 means the count of live nodes that [Store.Run] reads
	// in Redis (until it has read one, FailLocal decides closed); a Nodes
	// set wins over it.
	Nodes int
	// NodeID names this node in Redis's set of live nodes; "" means the
	// host name, the process id and a random suffix. Nodes sharing a
	// Redis need distinct ids.
	NodeID string
	// NodeTTL is how long a node's announcement lasts in Redis unless
	// renewed; Run renews it every third of it. 0 means
	// [DefaultNodeTTL]. A node that stops is counted for up to NodeTTL
	// by the others (a smaller share: safe); a node that starts is
	// counted by the others within NodeTTL/3.
	NodeTTL time.Duration
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
	// TLSConfig, for [Open] with a TLS URL, makes the connections' TLS
	// configuration from the URL's server name (see [NewClientTLS]); nil
	// means go-redis's (the system roots, no client certificate). New
	// ignores it: its client is made already.
	TLSConfig func(serverName string) *tls.Config
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

	// the nodes sharing Redis (nodes.go, run.go)
	nodeID    string
	nodeTTL   time.Duration
	count     nodeCount
	contacted atomic.Bool            // Redis has answered at least once
	persist   atomic.Pointer[string] // what a restart of Redis loses (run.go); nil: not read yet

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
	turn  chan struct{} // the pipeline goroutines' turn to gather (pipeline.go)
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
	endedAt   atomic.Int64  // when the last outage ended (0: none has)
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
		turn:     make(chan struct{}, 1),
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
	s.count.fixed = int64(max(opts.Nodes, 0))
	s.nodeID = opts.NodeID
	if s.nodeID == "" {
		s.nodeID = defaultNodeID()
	}
	s.nodeTTL = opts.NodeTTL
	if s.nodeTTL <= 0 {
		s.nodeTTL = DefaultNodeTTL
	}
	s.nodeTTL = max(s.nodeTTL, 3*time.Millisecond)
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
	s.turn <- struct{}{}
	s.wg.Add(n + 1)
	for range n {
		go s.work()
	}
	go s.probe()
	return s
}

// Open returns a store on a new client for a store URL (see [NewClient]),
// which the store closes in Close. It does not connect: see [Store.Ping].
//
// Open refuses a Timeout below [MinTimeout] with an error wrapping
// [ErrTimeoutTooShort].
func Open(rawURL string, opts Options) (*Store, error) {
	if opts.Timeout > 0 && opts.Timeout < MinTimeout {
		return nil, fmt.Errorf("%w: %v is below %v", ErrTimeoutTooShort, opts.Timeout, MinTimeout)
	}
	client, err := NewClientTLS(rawURL, opts.TLSConfig)
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
	s.reached()
	return nil
}

// RoundTrip returns the shortest of n PINGs to Redis (at least one), each
// waiting at most the store's longest wait: the least a take's round trip
// costs, whatever the load. A start-up check compares it with
// [Store.Timeout].
func (s *Store) RoundTrip(ctx context.Context, n int) (time.Duration, error) {
	least := time.Duration(-1)
	for range max(n, 1) {
		pctx, cancel := context.WithTimeout(ctx, s.maxWait)
		t0 := time.Now()
		err := s.client.Ping(pctx).Err()
		d := time.Since(t0)
		cancel()
		if err != nil {
			return 0, fmt.Errorf("redis store: measuring the round trip: %w", err)
		}
		if least < 0 || d < least {
			least = d
		}
	}
	s.reached()
	return least, nil
}

// Timeout returns the least time a take waits for Redis (Options.Timeout,
// or its default).
func (s *Store) Timeout() time.Duration { return s.timeout }

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
