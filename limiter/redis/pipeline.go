package redis

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/limiter"
)

const (
	// maxScriptTakes bounds the takes of one script call, so that no call
	// holds Redis for long.
	maxScriptTakes = 128
	// maxFlushTakes bounds the takes one pipeline gathers from the queue.
	maxFlushTakes = 1024
)

// call is one Take or TakeBatch on its way through a pipeline. The caller
// owns it until it is queued; the pipeline goroutine then fills out, ok,
// sent and err and signals done. A caller that stops waiting abandons the
// call to the garbage collector instead of reusing it.
type call struct {
	reqs   []limiter.Request // takes sent to Redis
	pos    []int             // TakeBatch: index in the caller's batch of each take
	out    []bucket.Decision // Redis's decision of each take
	ok     []bool            // whether out holds Redis's decision
	ents   []*shadowEntry    // FailLocal: the shadow entry of each take
	fate   []uint8           // FailLocal: each take's fate, under its entry's lock
	sent   int64             // store clock when the pipeline was sent
	sentAt int64             // and on the outage clock (time since the store's epoch)
	err    error             // first error of the call's takes
	done   chan struct{}
	timer  *time.Timer
}

func (s *Store) getCall() *call {
	if c, ok := s.calls.Get().(*call); ok {
		return c
	}
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &call{done: make(chan struct{}, 1), timer: t}
}

func (s *Store) putCall(c *call) {
	clear(c.ents)
	c.reqs, c.pos, c.out, c.ok, c.ents, c.fate, c.err = c.reqs[:0], c.pos[:0], c.out[:0], c.ok[:0], c.ents[:0], c.fate[:0], nil
	s.calls.Put(c)
}

// The ends of do: whether a call was answered in time, sent late (queued
// but not answered in time: its pipeline may still be answered), or never
// queued.
const (
	answered = iota
	late
	notQueued
)

// do queues c and waits for its pipeline, at most the store's current wait
// (between Options.Timeout and MaxTimeout). Unless it returns answered, the
// caller decides the takes by the failure policy, and must neither reuse c
// nor read more than c.reqs, c.pos and c.ents (and c.fate under the entry
// locks), which the pipeline may still be reading. The error is for ctx or
// Close.
func (s *Store) do(ctx context.Context, c *call) (int, error) {
	n := len(c.reqs)
	if cap(c.out) < n {
		c.out = make([]bucket.Decision, n)
		c.ok = make([]bool, n)
	}
	c.out, c.ok = c.out[:n], c.ok[:n]
	clear(c.ok)
	if c.ents != nil {
		if cap(c.fate) < n {
			c.fate = make([]uint8, n)
		}
		c.fate = c.fate[:n]
		clear(c.fate)
	}
	select {
	case <-s.quit:
		return notQueued, ErrClosed
	default:
	}
	c.timer.Reset(time.Duration(s.wait.Load()))
	select {
	case s.queue <- c:
	case <-c.timer.C:
		return notQueued, nil
	case <-ctx.Done():
		c.timer.Stop()
		return notQueued, ctx.Err()
	case <-s.quit:
		c.timer.Stop()
		return notQueued, ErrClosed
	}
	select {
	case <-c.done:
		c.timer.Stop()
		return answered, nil
	case <-c.timer.C:
		return late, nil
	case <-ctx.Done():
		return late, ctx.Err()
	}
}

// gatherYields bounds the yields of one gathering (see work).
const gatherYields = 3

// work is a pipeline goroutine: it gathers whatever is queued into one
// pipeline, sends it, then waits for more.
//
// One goroutine gathers at a time (it holds s.turn from its first call
// until it stops gathering), so that calls queued meanwhile wait in the
// queue for it instead of going to an idle goroutine one by one. Having
// its first call, it yields and takes what was queued meanwhile, and
// yields again while that brought more (at most gatherYields times), so
// that callers already running (a gRPC call decoded, about to queue its
// takes) join this round trip rather than the next. On a server with few
// cores a round trip then carries several times the takes it would
// otherwise, which costs this process and Redis fewer system calls and
// script calls per decision; when nothing else is ready to run a yield
// returns at once, and nothing waits on a timer.
func (s *Store) work() {
	defer s.wg.Done()
	var f flush
	for {
		select {
		case <-s.turn:
		case <-s.quit:
			return
		}
		select {
		case c := <-s.queue:
			f.calls = append(f.calls[:0], c)
			n := len(c.reqs)
			for range gatherYields {
				runtime.Gosched()
				more := false
			drain:
				for n < maxFlushTakes {
					select {
					case c := <-s.queue:
						f.calls = append(f.calls, c)
						n += len(c.reqs)
						more = true
					default:
						break drain
					}
				}
				if !more || n >= maxFlushTakes {
					break
				}
			}
			s.turn <- struct{}{}
			s.flush(&f)
			for i, c := range f.calls {
				c.done <- struct{}{}
				f.calls[i] = nil
			}
		case <-s.quit:
			s.turn <- struct{}{}
			return
		}
	}
}

// flush holds a pipeline goroutine's buffers, reused from one pipeline to
// the next.
type flush struct {
	calls   []*call
	scripts []script
	keyIdx  map[string]int
	limits  map[limitKey]limitArgs
	groups  map[string][]take
	order   []string
	all     []take
}

// limitKey is a limit as the script sees it: capacity and interval.
type limitKey struct{ capacity, interval int64 }

// limitArgs are a limit's capacity and interval as script arguments,
// boxed once per pipeline goroutine instead of once per take.
type limitArgs struct{ capacity, interval any }

// maxLimitArgs bounds the limits a pipeline goroutine keeps boxed; past
// it, it forgets them all and starts again.
const maxLimitArgs = 4096

// take locates one take: request j of call c.
type take struct {
	c *call
	j int
}

// script is one script call of a pipeline.
type script struct {
	keys  []any // Redis keys (strings)
	args  []any
	takes []take
	cmd   *goredis.IntSliceCmd
}

// scriptCmd is the command running take.lua on sc: EVALSHA, or EVAL with
// the source when eval is set. Its reply is read as integers, with no
// value boxed.
func scriptCmd(ctx context.Context, sc *script, eval bool) *goredis.IntSliceCmd {
	args := make([]any, 0, 3+len(sc.keys)+len(sc.args))
	if eval {
		args = append(args, "eval", takeSource)
	} else {
		args = append(args, "evalsha", takeScript.Hash())
	}
	args = append(args, len(sc.keys))
	args = append(args, sc.keys...)
	args = append(args, sc.args...)
	cmd := goredis.NewIntSliceCmd(ctx, args...)
	cmd.SetFirstKeyPos(3) // for Cluster and Ring: the first key routes the call
	return cmd
}

// flush decides the takes of f.calls in one pipeline.
func (s *Store) flush(f *flush) {
	sentAt := int64(time.Since(s.epoch)) // on the outage clock of noteDown
	var now int64
	arg0 := ""
	if s.now != nil {
		now = s.now().UnixNano()
		arg0 = strconv.FormatInt(now, 10)
	} else {
		now = s.clock()
	}
	f.scripts = f.scripts[:0]
	if s.byTag {
		if f.groups == nil {
			f.groups = make(map[string][]take)
		}
		f.order = f.order[:0]
		for _, c := range f.calls {
			for j, r := range c.reqs {
				tag := r.Key
				if s.braces {
					tag = s.prefix + r.Key
				}
				tag = hashTag(tag)
				g := f.groups[tag]
				if len(g) == 0 {
					f.order = append(f.order, tag)
				}
				f.groups[tag] = append(g, take{c, j})
			}
		}
		for _, tag := range f.order {
			g := f.groups[tag]
			s.scriptsFor(f, g, arg0)
			clear(g)
			f.groups[tag] = g[:0]
		}
		if len(f.groups) > 4*len(f.order)+64 {
			clear(f.groups) // forget tags of past pipelines
		}
	} else {
		f.all = f.all[:0]
		for _, c := range f.calls {
			for j := range c.reqs {
				f.all = append(f.all, take{c, j})
			}
		}
		s.scriptsFor(f, f.all, arg0)
		clear(f.all) // drop the calls for the garbage collector
	}

	ctx, cancel := context.WithTimeout(context.Background(), s.deadline)
	defer cancel()
	for _, c := range f.calls {
		c.sent, c.sentAt = now, sentAt
	}
	start := time.Now()
	pipe := s.client.Pipeline()
	for i := range f.scripts {
		sc := &f.scripts[i]
		sc.cmd = scriptCmd(ctx, sc, false)
		_ = pipe.Process(ctx, sc.cmd) // only queues it
	}
	_, _ = pipe.Exec(ctx)
	// Servers without the script (new, restarted, failed over) get it
	// with EVAL, which also caches it for the next EVALSHA.
	var retry goredis.Pipeliner
	for i := range f.scripts {
		sc := &f.scripts[i]
		if goredis.HasErrorPrefix(sc.cmd.Err(), "NOSCRIPT") {
			if retry == nil {
				retry = s.client.Pipeline()
			}
			sc.cmd = scriptCmd(ctx, sc, true)
			_ = retry.Process(ctx, sc.cmd)
		}
	}
	if retry != nil {
		_, _ = retry.Exec(ctx)
	}
	rtt := time.Since(start)
	recv := s.clock()
	up, reached := false, false
	for i := range f.scripts {
		if e := f.scripts[i].cmd.Err(); e == nil || isReply(e) {
			reached = true
		}
	}
	failAt := s.failAt.Load()
	if !reached {
		s.failAt.Store(recv)
	} else if now > failAt && s.upAt.Load() <= failAt {
		s.upAt.Store(recv) // Redis answers again: what it holds of lost takes, it has applied
	}
	// Lost takes are forgotten on answers to pipelines sent once Redis
	// was seen answering again after the last failure.
	clearLost := now > s.upAt.Load() && s.upAt.Load() > failAt
	for i := range f.scripts {
		sc := &f.scripts[i]
		err := s.decode(sc, recv, clearLost)
		if err != nil {
			s.errorsN.Add(1)
			out := outLost
			if isReply(sc.cmd.Err()) {
				out = outRejected
			}
			for _, t := range sc.takes {
				if t.c.err == nil {
					t.c.err = err
				}
				if t.c.ents != nil {
					r := t.c.reqs[t.j]
					t.c.ents[t.j].settle(r.Limit, r.Tokens, &t.c.fate[t.j], out, false, 0, recv, false)
				}
			}
		} else {
			up = true
		}
		clear(sc.keys)
		clear(sc.args)
		sc.keys, sc.args, sc.takes, sc.cmd = sc.keys[:0], sc.args[:0], sc.takes[:0], nil
	}
	s.pipelineEnded(reached)
	if up {
		s.reached()
		s.wait.Store(int64(s.est.observe(rtt)))
		s.noteUp(sentAt)
	}
}

// isReply reports whether err is Redis's own error reply (such as a script
// error): Redis answered, and applied nothing of the script.
func isReply(err error) bool {
	var re goredis.Error
	return errors.As(err, &re) && !errors.Is(err, context.DeadlineExceeded)
}

// scriptsFor appends the script calls deciding takes, in order.
func (s *Store) scriptsFor(f *flush, takes []take, arg0 string) {
	if f.keyIdx == nil {
		f.keyIdx = make(map[string]int)
		f.limits = make(map[limitKey]limitArgs)
	}
	for len(takes) > 0 {
		n := min(len(takes), maxScriptTakes)
		if len(f.scripts) < cap(f.scripts) {
			f.scripts = f.scripts[:len(f.scripts)+1]
		} else {
			f.scripts = append(f.scripts, script{})
		}
		sc := &f.scripts[len(f.scripts)-1]
		sc.args = append(sc.args, arg0)
		clear(f.keyIdx)
		for _, t := range takes[:n] {
			r := t.c.reqs[t.j]
			k, ok := f.keyIdx[r.Key]
			if !ok {
				sc.keys = append(sc.keys, s.prefix+r.Key)
				k = len(sc.keys)
				f.keyIdx[r.Key] = k
			}
			lk := limitKey{r.Limit.Capacity(), int64(r.Limit.Interval())}
			la, ok := f.limits[lk]
			if !ok {
				if len(f.limits) >= maxLimitArgs {
					clear(f.limits)
				}
				la = limitArgs{lk.capacity, lk.interval}
				f.limits[lk] = la
			}
			sc.args = append(sc.args, k, la.capacity, la.interval, r.Tokens)
			sc.takes = append(sc.takes, t)
		}
		takes = takes[n:]
	}
}

// decode writes the decisions of a completed script call to its calls,
// and settles its takes' shadow entries with them.
func (s *Store) decode(sc *script, recv int64, clearLost bool) error {
	vals, err := sc.cmd.Result()
	if err != nil {
		return fmt.Errorf("redis take script: %w", err)
	}
	if len(vals) != 4*len(sc.takes) {
		return fmt.Errorf("redis take script: %d values for %d takes", len(vals), len(sc.takes))
	}
	for i, t := range sc.takes {
		v := vals[4*i : 4*i+4]
		r := t.c.reqs[t.j]
		d := bucket.Decision{
			Allowed:    v[0] == 1,
			Limit:      r.Limit,
			Remaining:  v[1],
			RetryAfter: time.Duration(v[2]),
			ResetAfter: time.Duration(v[3]),
		}
		if v[2] < 0 {
			d.RetryAfter = bucket.Never
		}
		t.c.out[t.j] = d
		t.c.ok[t.j] = true
		if t.c.ents != nil {
			t.c.ents[t.j].settle(r.Limit, r.Tokens, &t.c.fate[t.j], outAnswered, d.Allowed, v[3], recv, clearLost)
		}
	}
	return nil
}

// hashTag returns the part of key Redis Cluster hashes: the text between
// the first '{' and the next '}' if not empty, else the whole key.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}
