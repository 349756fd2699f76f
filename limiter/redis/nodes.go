package redis

// This file is how nodes sharing a Redis count each other: each announces
// itself in one sorted set of the store's key space, and FailLocal divides
// a bucket among the nodes it last saw (see Failures in the package
// documentation).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// DefaultNodeTTL is how long a node's announcement lasts in Redis when
// Options.NodeTTL is 0.
const DefaultNodeTTL = 6 * time.Second

// announceScript announces a node in the set of live nodes and returns how
// many there are, in one round trip: the member's score is the instant its
// announcement expires, in Unix milliseconds on Redis's clock (or on
// ARGV[3], a test's fake clock), and members past it are removed. The set
// itself expires two TTLs after the last announcement.
//
// KEYS[1] the set; ARGV[1] the node's id; ARGV[2] the TTL in ms; ARGV[3]
// "" or the time in Unix ms.
var announceScript = goredis.NewScript(`
local ttl = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
if now == nil then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. now)
if redis.call('PTTL', KEYS[1]) < 2 * ttl then
  redis.call('PEXPIRE', KEYS[1], 2 * ttl)
end
return redis.call('ZCARD', KEYS[1])
`)

// nodeCount is what a store knows of the nodes sharing its Redis.
type nodeCount struct {
	fixed int64 // Options.Nodes: when set, the divisor whatever the count

	mu     sync.Mutex
	heldAt int64        // store clock when held was last seen or raised
	held   atomic.Int64 // the divisor: the highest count seen within a TTL (0: none yet)
	last   atomic.Int64 // the latest count read
}

// observe records a count read at now (store clock). The divisor rises at
// once and falls only once no higher count has been seen for ttl: after
// an outage longer than the TTL, or a restart of Redis, the set holds
// only the nodes that announced again so far.
func (c *nodeCount) observe(n, now int64, ttl time.Duration) {
	c.last.Store(n)
	c.mu.Lock()
	defer c.mu.Unlock()
	if n >= c.held.Load() || now-c.heldAt >= int64(ttl) {
		c.held.Store(n)
		c.heldAt = now
	}
}

// divisor is the number of nodes FailLocal shares a bucket among: 0
// while the store has not counted them (and Options.Nodes is not set).
func (c *nodeCount) divisor() int64 {
	if c.fixed > 0 {
		return c.fixed
	}
	return c.held.Load()
}

// Nodes returns the number of nodes among which a local decision shares a
// bucket: Options.Nodes when set, otherwise the highest count of live
// nodes read in Redis within the last NodeTTL; 0 before Run has read
// one. While it is 0 a FailLocal store decides what Redis does not
// answer as FailClosed would (it cannot know its share: deciding from a
// whole bucket is how N nodes admit N buckets), and [Store.Health]
// reports it not ready.
func (s *Store) Nodes() int { return int(s.count.divisor()) }

// Counted reports whether the store knows how many nodes share its
// Redis: Options.Nodes is set, or Run has read a count.
func (s *Store) Counted() bool { return s.count.divisor() > 0 }

// LiveNodes returns the count of live nodes Run read in Redis last, this
// node included; 0 before it has read one.
func (s *Store) LiveNodes() int { return int(s.count.last.Load()) }

// NodeID returns the id this store announces itself by.
func (s *Store) NodeID() string { return s.nodeID }

// NodesKey returns the Redis key of the set of live nodes: the key prefix
// followed by "nodes", which no tollgate bucket key (all begin with a
// brace) can be.
func (s *Store) NodesKey() string { return s.prefix + "nodes" }

// defaultNodeID is the host name, the process id and a random suffix,
// unique among nodes sharing a Redis.
func defaultNodeID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "tollgate"
	}
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return host + "/" + strconv.Itoa(os.Getpid()) + "/" + hex.EncodeToString(b[:])
}

// announceWait is the least time an announcement waits for Redis: a
// count is worth a longer wait than a take (it is made every NodeTTL/3,
// off the request path), and a take timeout shorter than a loaded
// machine's round trip must not leave the node uncounted.
const announceWait = 2 * time.Second

// announce announces the node in Redis and records the count of live
// nodes it reads back. It waits for Redis announceWait, or the store's
// longest wait if longer.
func (s *Store) announce(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, max(s.maxWait, announceWait))
	defer cancel()
	now := ""
	if s.now != nil {
		now = strconv.FormatInt(s.now().UnixMilli(), 10)
	}
	n, err := announceScript.Run(ctx, s.client, []string{s.NodesKey()}, s.nodeID, s.nodeTTL.Milliseconds(), now).Int64()
	if err != nil {
		return fmt.Errorf("redis store: announcing node %q: %w", s.nodeID, err)
	}
	s.reached()
	s.count.observe(n, s.clock(), s.nodeTTL)
	return nil
}

// leave removes the node from the set of live nodes, so that the others
// count it out at their next announcement rather than after its TTL.
func (s *Store) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), s.maxWait)
	defer cancel()
	if err := s.client.ZRem(ctx, s.NodesKey(), s.nodeID).Err(); err != nil {
		s.log.Debug("redis store: leaving the set of live nodes", "node", s.nodeID, "error", err)
	}
}
