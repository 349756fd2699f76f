package redis

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/bucket"
)

// simOp is one take in TestShadowNeverOverAdmits: sent to a model of
// Redis, applied (or not) and answered (or lost) at instants of a fake
// clock, and decided by its caller at its timeout if no answer came first.
type simOp struct {
	wb       int64
	ent      *shadowEntry
	fate     uint8
	exec     int64 // when Redis applies it; -1: never
	answer   int64 // when its answer arrives; -1: lost
	lostAt   int64 // when its pipeline fails, if lost
	timeout  int64 // when its caller stops waiting
	sent     int64
	executed bool
	settled  bool
	decided  bool
	allowed  bool
	reset    int64
}

// TestShadowNeverOverAdmits runs one node's shadow table against a model
// of Redis (the script's arithmetic on one bucket) on a fake clock, with
// answers that come late, after their callers gave up, or never (lost
// pipelines that Redis applies late or not at all), and an outage in which
// takes are decided without being sent. Whatever happens, the takes the
// node admitted (by Redis's answer or its own decision) never exceed what
// one bucket allows: capacity + elapsed/interval.
func TestShadowNeverOverAdmits(t *testing.T) {
	limit := bucket.MustLimit(10, 100) // one token per 10 ms
	iv := int64(limit.Interval())
	burst := limit.Capacity() * iv
	ms := int64(time.Millisecond)
	var local, redisDecided, localAllowed int64
	for seed := range 300 {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		tab := newShadows(1000, 1)
		const key = "k"
		start := int64(1_000_000) * ms
		end := start + 2000*ms
		var redis int64 // Redis's state of the bucket: full at start
		var ops []*simOp
		var admitted, last int64
		var failAt, upAt int64 // as Store.flush keeps them
		admit := func(ok bool, now int64) {
			if ok {
				admitted++
				last = now
			}
		}
		stallFrom, stallTo := start+int64(rng.IntN(1500))*ms, int64(0)
		stallTo = stallFrom + int64(50+rng.IntN(400))*ms
		outFrom := start + int64(rng.IntN(1800))*ms
		outTo := outFrom + int64(rng.IntN(300))*ms
		for now := start; now < end+200*ms; now += ms {
			if now < end {
				for k := rng.IntN(4); k > 0; k-- {
					if now >= outFrom && now < outTo {
						// The breaker is open: decided at once, never sent.
						d := tab.decide(key, nil, limit, limit, false, 1, nil, now)
						local++
						if d.Allowed {
							localAllowed++
						}
						admit(d.Allowed, now)
						continue
					}
					ent, wb := tab.send(key, limit, 1, now)
					o := &simOp{wb: wb, ent: ent, timeout: now + 5*ms, exec: now + ms, answer: -1, sent: now}
					stalled := now >= stallFrom && now < stallTo
					if stalled {
						o.exec = stallTo // applied when Redis resumes, before anything sent later
					}
					switch r := rng.IntN(50); {
					case r == 0:
						o.exec = -1 // refused: never applied
						o.lostAt = now + int64(rng.IntN(3))*ms
					case r == 1 || stalled && r < 25:
						o.lostAt = now + 20*ms // the pipeline's deadline passes
					case r < 6:
						o.answer = o.exec + int64(4+rng.IntN(8))*ms // late
					default:
						o.answer = o.exec + int64(rng.IntN(2))*ms
					}
					ops = append(ops, o)
				}
			}
			for _, o := range ops {
				if !o.executed && o.exec >= 0 && o.exec <= now {
					o.executed = true
					tat := max(redis, now)
					if o.wb > 0 {
						if next := min(tat+o.wb*iv, now+burst); next > tat {
							tat = next
						}
						redis = tat
					}
					o.allowed = tat+iv-now <= burst
					if o.allowed {
						redis = tat + iv
					}
					o.reset = max(redis, now) - now
				}
			}
			for _, o := range ops {
				if o.settled {
					continue
				}
				switch {
				case o.answer >= 0 && o.answer <= now:
					o.settled = true
					if o.sent > failAt && upAt <= failAt {
						upAt = now
					}
					clearLost := o.sent > upAt && upAt > failAt
					if o.wb > 0 {
						o.ent.settle(limit, -o.wb, nil, outAnswered, true, o.reset, now, clearLost)
					}
					o.ent.settle(limit, 1, &o.fate, outAnswered, o.allowed, o.reset, now, clearLost)
					if !o.decided {
						o.decided = true
						redisDecided++
						admit(o.allowed, now)
					}
				case o.answer < 0 && o.lostAt <= now:
					o.settled = true
					failAt = now
					if o.wb > 0 {
						o.ent.settle(limit, -o.wb, nil, outLost, false, 0, now, false)
					}
					o.ent.settle(limit, 1, &o.fate, outLost, false, 0, now, false)
					if !o.decided { // Store.finish: the failure policy decides
						o.decided = true
						d := tab.decide(key, o.ent, limit, limit, false, 1, &o.fate, now)
						local++
						admit(d.Allowed, now)
					}
				}
			}
			live := ops[:0]
			for _, o := range ops {
				if !o.decided && o.timeout <= now {
					o.decided = true
					d := tab.decide(key, o.ent, limit, limit, false, 1, &o.fate, now)
					local++
					admit(d.Allowed, now)
				}
				if !o.decided || !o.settled || !o.executed && o.exec >= 0 {
					live = append(live, o)
				}
			}
			clear(ops[len(live):])
			ops = live
		}
		if bound := limit.Capacity() + (last-start)/iv; admitted > bound {
			t.Fatalf("seed %d: admitted %d, over the bound %d (stall %v–%v, outage %v–%v)", seed, admitted, bound,
				time.Duration(stallFrom-start), time.Duration(stallTo-start), time.Duration(outFrom-start), time.Duration(outTo-start))
		}
	}
	t.Logf("local allowed in outages %d of %d local", localAllowed, local)
	if local == 0 || redisDecided == 0 {
		t.Fatalf("%d local and %d Redis decisions: the simulation does not exercise both", local, redisDecided)
	}
}

// TestShadowUnseenKeyIsAShare: a key this node never saw starts its
// fallback as the node's share of a full bucket, capacity and refill
// divided by the nodes, and refills at the share's rate.
func TestShadowUnseenKeyIsAShare(t *testing.T) {
	limit := bucket.MustLimit(50, 20)
	tab := newShadows(1000, 2)
	sh := share(limit, 2)
	now := int64(time.Hour)
	n := 0
	for tab.decide("k", nil, limit, sh, false, 1, nil, now).Allowed {
		n++
	}
	if n != 25 {
		t.Fatalf("an unseen key admitted %d takes on one of 2 nodes, want 25", n)
	}
	d := tab.decide("k", nil, limit, sh, false, 1, nil, now)
	if d.Limit != limit || d.RetryAfter != 100*time.Millisecond {
		t.Fatalf("denied take: %+v, want the take's limit and a retry at the share's rate (10/s)", d)
	}
	if !tab.decide("k", nil, limit, sh, false, 1, nil, now+int64(100*time.Millisecond)).Allowed {
		t.Fatal("the share did not refill")
	}
}

// TestShadowContinuesFromRedis: after Redis answered that a bucket holds
// 3 tokens, local decisions admit 3 (Redis's, not a full bucket's), and the
// next take sent carries them as a write-back.
func TestShadowContinuesFromRedis(t *testing.T) {
	limit := bucket.MustLimit(50, 1.0/3600)
	iv := int64(limit.Interval())
	tab := newShadows(1000, 1)
	now := int64(time.Hour)
	e, wb := tab.send("k", limit, 1, now)
	var fate uint8
	// Redis admitted it, leaving 3 tokens: full again in 47 intervals.
	e.settle(limit, 1, &fate, outAnswered, true, 47*iv, now, false)
	n := 0
	for tab.decide("k", nil, limit, limit, false, 1, nil, now).Allowed {
		n++
	}
	if n != 3 || wb != 0 {
		t.Fatalf("admitted %d locally after Redis said 3 tokens were left (write-back %d before)", n, wb)
	}
	if _, wb := tab.send("k", limit, 1, now); wb != 3 {
		t.Fatalf("the next take carries a write-back of %d tokens, want 3", wb)
	}
}

// TestShadowTableIsBounded: the table forgets the least recently used keys
// beyond its bound, but keeps those with tokens to write back while there
// is room.
func TestShadowTableIsBounded(t *testing.T) {
	limit := bucket.MustLimit(50, 20)
	const bound = 64 * 100
	tab := newShadows(bound, 1)
	now := int64(time.Hour)
	tab.decide("owed", nil, limit, limit, false, 1, nil, now) // admitted locally: owed to Redis
	for i := range 20 * bound {
		e, _ := tab.send("k"+strconv.Itoa(i), limit, 1, now)
		var fate uint8
		e.settle(limit, 1, &fate, outAnswered, true, 0, now, false)
	}
	if n := tab.len(); n > bound {
		t.Fatalf("%d keys held, bound %d", n, bound)
	}
	if _, wb := tab.send("owed", limit, 1, now); wb != 1 {
		t.Fatalf("the owed key's write-back is %d after %d other keys, want 1", wb, 20*bound)
	}
}

// TestWaitEstimator: the wait follows the round trips, within its floor
// and ceiling.
func TestWaitEstimator(t *testing.T) {
	w := waitEstimator{floor: 50 * time.Millisecond, ceiling: 200 * time.Millisecond}
	var got time.Duration
	for range 50 {
		got = w.observe(time.Millisecond)
	}
	if got != 50*time.Millisecond {
		t.Fatalf("fast answers: wait %v, want the floor", got)
	}
	for range 5 {
		got = w.observe(40 * time.Millisecond)
	}
	if got <= 50*time.Millisecond || got > 200*time.Millisecond {
		t.Fatalf("slower answers: wait %v, want above the floor, at most the ceiling", got)
	}
	for range 50 {
		got = w.observe(time.Second)
	}
	if got != 200*time.Millisecond {
		t.Fatalf("very slow answers: wait %v, want the ceiling", got)
	}
}

// BenchmarkShadow measures what FailLocal adds to every take on a healthy
// Redis: the shadow table's send and settle, for keys seen before (hot)
// and for a new key each take (as BenchmarkTake's spread of keys makes
// them).
func BenchmarkShadow(b *testing.B) {
	limit := bucket.MustLimit(50, 20)
	keys := make([]string, 1<<20)
	for i := range keys {
		keys[i] = "{ecs/" + strconv.Itoa(100000000000+i) + "}:us-east-1:cluster-read"
	}
	for _, mode := range []string{"hot", "new"} {
		b.Run(mode, func(b *testing.B) {
			tab := newShadows(100_000, 1)
			now := int64(time.Hour)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				k := keys[i%1000]
				if mode == "new" {
					k = keys[i%len(keys)]
				}
				i++
				e, _ := tab.send(k, limit, 1, now)
				var fate uint8
				e.settle(limit, 1, &fate, outAnswered, true, 0, now, false)
			}
		})
	}
}
