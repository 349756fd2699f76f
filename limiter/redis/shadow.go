package redis

import (
	"hash/maphash"
	"strings"
	"sync"

	"github.com/tollgate/tollgate/bucket"
)

// The shadow table is FailLocal's memory: per key decided recently, what
// this node knows of the bucket's state in Redis, so that takes Redis does
// not answer in time are decided from it and not from a full bucket.
//
// All instants are on the store's clock (Store.clock). A key's view is a
// bucket state (the instant the bucket is full again) no earlier than what
// Redis holds plus whatever Redis may not have counted yet:
//
//   - base, the latest state Redis reported, counted from when its answer
//     arrived (no earlier than when Redis decided);
//   - the tokens of takes sent and not answered (inflight), and of takes
//     whose pipeline failed (uncertain): Redis may apply them, late;
//   - the tokens this node admitted on its own and has not written back
//     (owe, a bucket state of those tokens alone, so that what refills
//     while they wait is not owed), and write-backs in flight (writing).
//
// A local decision is a take from the view, under the node's share of the
// limit (capacity and refill divided by Options.Nodes). The first take of
// a key sent to Redis after local admissions carries them as a write-back:
// a take of -k tokens that the script charges without a check, up to an
// empty bucket. So one node never admits more than the bucket allows, across
// a stall or an outage, whatever Redis did with the takes it could not
// answer.

const shadowShards = 64

// Fates of one take of a call, read and written under its entry's shard
// lock: whether the pipeline or the caller's own decision came first.
const (
	fateWaiting      uint8 = iota // sent; neither answered nor decided locally
	fateAnswered                  // Redis answered (or refused it with an error)
	fateLost                      // its pipeline failed: Redis may apply it yet
	fateLocalAllowed              // decided locally (allowed) before any answer
	fateLocalDenied               // decided locally (denied) before any answer
	fateDone                      // lost, then decided locally
)

// Outcomes of a take's pipeline, for settle.
const (
	outAnswered = iota // Redis decided it; its decision is known
	outRejected        // Redis answered an error: nothing was applied
	outLost            // no answer: Redis may have applied it, or may yet
)

type shadowEntry struct {
	sh          *shadowShard
	iv          int64 // interval of the key's latest limit, ns
	base        int64 // latest state Redis reported
	view        int64 // the state local decisions start from
	inflight    int64 // tokens of takes sent and not settled
	uncertain   int64 // tokens of lost takes not since decided locally
	uncertainAt int64 // when the latest lost take was settled
	writing     int64 // tokens of write-backs sent and not settled
	owe         int64 // state of the locally admitted tokens not yet written back
}

type shadowShard struct {
	mu  sync.Mutex
	cur map[string]*shadowEntry // used since the last rotation
	old map[string]*shadowEntry // the generation before
	per int                     // cur is rotated into old at this size
	_   [40]byte
}

// shadows is the table: 64 shards, each two generations of a map. A key
// used in the current generation stays; a rotation drops the keys unused
// for a whole generation (an LRU by generations), except those with tokens
// still to write back. At most limit keys are kept in all.
type shadows struct {
	seed   maphash.Seed
	nodes  int64
	shards [shadowShards]shadowShard
}

func newShadows(limit, nodes int) *shadows {
	t := &shadows{seed: maphash.MakeSeed(), nodes: int64(max(nodes, 1))}
	per := max(limit/(2*shadowShards), 16)
	for i := range t.shards {
		sh := &t.shards[i]
		sh.cur, sh.old, sh.per = make(map[string]*shadowEntry), make(map[string]*shadowEntry), per
	}
	return t
}

// entry returns key's entry, made (as a full bucket: the node's share of
// a bucket it never saw) if the table has none. The shard must be locked.
func (sh *shadowShard) entry(key string, now int64) *shadowEntry {
	if e, ok := sh.cur[key]; ok {
		return e
	}
	e, ok := sh.old[key]
	if !ok {
		e = &shadowEntry{sh: sh, base: now, view: now}
	}
	if len(sh.cur) >= sh.per {
		// Rotate: the old generation is dropped, but tokens owed to Redis
		// are not forgotten while there is room for them.
		kept := sh.old
		sh.old, sh.cur = sh.cur, kept
		clear(kept)
		for k, o := range sh.old {
			if len(sh.cur) >= sh.per/2 {
				break
			}
			if o.owe > now || o.writing > 0 {
				sh.cur[k] = o
			}
		}
	}
	if ok {
		delete(sh.old, key)
	}
	sh.cur[strings.Clone(key)] = e
	return e
}

func (t *shadows) shard(key string) *shadowShard {
	return &t.shards[maphash.String(t.seed, key)%shadowShards]
}

// counted reports whether a take of n tokens is charged at all: takes of 0
// tokens and takes larger than the capacity never change a bucket.
func counted(limit bucket.Limit, n int64) bool { return n > 0 && n <= limit.Capacity() }

// send records a take of n tokens of key about to be sent to Redis, and
// returns its entry and the tokens to write back before it (0: none).
func (t *shadows) send(key string, limit bucket.Limit, n int64, now int64) (*shadowEntry, int64) {
	sh := t.shard(key)
	sh.mu.Lock()
	e := sh.entry(key, now)
	e.iv = int64(limit.Interval())
	var wb int64
	if e.owe > now {
		wb = min((e.owe-now+e.iv-1)/e.iv, limit.Capacity())
		e.owe = 0
		e.writing += wb
	}
	if counted(limit, n) {
		e.inflight += n
		e.view = max(e.view, now) + n*e.iv
	}
	sh.mu.Unlock()
	return e, wb
}

// unsend undoes send for a take that was never queued.
func (e *shadowEntry) unsend(limit bucket.Limit, n, wb, now int64) {
	e.sh.mu.Lock()
	if counted(limit, n) {
		e.inflight -= n
		e.view -= n * e.iv
	}
	if wb > 0 {
		e.writing -= wb
		e.owe = max(e.owe, now) + wb*e.iv
	}
	e.sh.mu.Unlock()
}

// settle records the outcome of a take of n tokens (a write-back if n < 0)
// whose pipeline ended at now; reset is the decision's ResetAfter when
// Redis answered, and clear says the pipeline was sent after Redis was
// seen answering again since its last lost take (so that Redis has applied
// every lost take it ever will).
func (e *shadowEntry) settle(limit bucket.Limit, n int64, fate *uint8, out int, allowed bool, reset, now int64, clear bool) {
	e.sh.mu.Lock()
	defer e.sh.mu.Unlock()
	if n < 0 {
		e.writing += n
		if out != outAnswered {
			e.owe = max(e.owe, now) - n*e.iv // written again with the next take
		}
	} else if counted(limit, n) {
		e.inflight -= n
		switch *fate {
		case fateWaiting, fateLocalDenied:
			if out == outLost {
				e.uncertain += n
				e.uncertainAt = now
			}
		case fateLocalAllowed:
			if out != outAnswered || !allowed {
				// Admitted here but not by Redis: write it back.
				e.owe = max(e.owe, now) + n*e.iv
			}
		}
	}
	if fate != nil {
		switch {
		case *fate != fateWaiting:
		case out == outLost:
			*fate = fateLost
		default:
			*fate = fateAnswered
		}
	}
	if out != outAnswered {
		return
	}
	e.base = max(e.base, now+reset)
	if clear && e.uncertainAt < now {
		e.uncertain = 0
	}
	e.rebase(now)
}

// rebase recomputes the view from Redis's latest state.
func (e *shadowEntry) rebase(now int64) {
	e.view = max(e.base, now) + (e.inflight+e.uncertain+e.writing)*e.iv + max(e.owe-now, 0)
}

// decide is the local decision of a take of n tokens of key at now, with
// limit as the take's and share the node's part of it; closed denies it
// as an empty bucket would (the node's share is not known). fate is the
// take's own, nil for a take that was never sent.
func (t *shadows) decide(key string, e *shadowEntry, limit, share bucket.Limit, closed bool, n int64, fate *uint8, now int64) bucket.Decision {
	sh := t.shard(key)
	if e != nil {
		sh = e.sh
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e == nil {
		e = sh.entry(key, now)
		e.iv = int64(limit.Interval())
	}
	// A take still in flight, or lost, is already in the view: decide
	// as if it were not, and count it once.
	var own int64
	f := fateAnswered
	if fate != nil {
		f = *fate
	}
	if counted(limit, n) && (f == fateWaiting || f == fateLost) {
		own = n
	}
	next, d := share.TakeAt(bucket.State(e.view-own*e.iv), now, n)
	if closed {
		next, d = limit.TakeAt(bucket.State(now+limit.Capacity()*int64(limit.Interval())), now, n)
	}
	d.Limit = limit
	if fate != nil {
		switch f {
		case fateWaiting:
			*fate = fateLocalDenied
			if d.Allowed {
				*fate = fateLocalAllowed
			}
		case fateLost:
			*fate = fateDone
		}
	}
	if !d.Allowed || n == 0 {
		return d
	}
	e.view = max(e.view, int64(next))
	switch f {
	case fateWaiting:
		// Settled when its pipeline ends: owed only if Redis did not
		// admit it too.
	case fateLost:
		e.uncertain -= n
		e.owe = max(e.owe, now) + n*e.iv
	default:
		e.owe = max(e.owe, now) + n*e.iv
	}
	return d
}

// share returns a node's part of limit among n nodes: capacity and refill
// divided by n (at least one token).
func share(limit bucket.Limit, n int64) bucket.Limit {
	if n <= 1 {
		return limit
	}
	l, err := bucket.NewLimit(max(limit.Capacity()/n, 1), limit.RefillPerSecond()/float64(n))
	if err != nil {
		return limit
	}
	return l
}

// len returns the number of keys held, for tests.
func (t *shadows) len() int {
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		n += len(sh.cur) + len(sh.old)
		sh.mu.Unlock()
	}
	return n
}
