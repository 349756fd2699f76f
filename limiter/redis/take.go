package redis

// This file is the store's Take and TakeBatch: queue the takes to a
// pipeline, wait at most the store's wait, decide by the failure policy
// what Redis did not answer.

import (
	"context"
	"errors"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/limiter"
)

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
	s.noteDown(c.err, c.sentAt)
	var ent *shadowEntry
	var fate *uint8
	if s.shadow != nil {
		ent, fate = c.ents[j], &c.fate[j]
	}
	return s.fallback(r.Key, r.Limit, r.Tokens, ent, fate)
}
