package cloudmap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

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
// its JSON v; "" deletes it. It keeps s.size, as the state's own changes
// do, so that a state brought up to date by the log is bounded as a
// loaded one is.
func applyRecord(s *state, f, v string) error {
	kind, id, ok := strings.Cut(f, ":")
	if !ok {
		return fmt.Errorf("cloudmap: redis record %q: no kind", f)
	}
	bad := func(err error) error { return fmt.Errorf("cloudmap: redis record %s: %w", f, err) }
	switch kind {
	case kindNamespace:
		if old := s.Namespaces[id]; old != nil {
			s.size -= nsBytes(old)
		}
		if v == "" {
			delete(s.Namespaces, id)
			return nil
		}
		ns := &namespace{}
		if err := json.Unmarshal([]byte(v), ns); err != nil {
			return bad(err)
		}
		s.Namespaces[id] = ns
		s.size += nsBytes(ns)
	case kindService:
		old := s.Services[id]
		if old != nil {
			s.size -= svcBytes(old)
		}
		if v == "" {
			if old != nil {
				for _, in := range old.Instances {
					s.size -= instBytes(in)
				}
			}
			delete(s.Services, id)
			return nil
		}
		sv := &service{}
		if err := json.Unmarshal([]byte(v), sv); err != nil {
			return bad(err)
		}
		if old != nil {
			sv.Instances, sv.Revision = old.Instances, old.Revision
		} else {
			sv.Instances = map[string]*instance{}
		}
		s.Services[id] = sv
		s.size += svcBytes(sv)
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
		if old := sv.Instances[instID]; old != nil {
			s.size -= instBytes(old)
			if old.RequestID != "" {
				delete(s.reqs, old.RequestID)
			}
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
		s.size += instBytes(in)
		if in.RequestID != "" {
			s.reqs[in.RequestID] = reqRef{svcID, instID}
		}
	case kindOperation:
		old := s.Ops[id]
		if old != nil {
			s.size -= opBytes(old)
		}
		if v == "" {
			delete(s.Ops, id)
			return nil
		}
		op := &operation{}
		if err := json.Unmarshal([]byte(v), op); err != nil {
			return bad(err)
		}
		if old == nil {
			s.OpOrder = append(s.OpOrder, id)
		}
		s.Ops[id] = op
		s.size += opBytes(op)
	case kindTags:
		s.size -= tagsBytes(s.Tags[id])
		if v == "" {
			delete(s.Tags, id)
			return nil
		}
		var tags []tagJSON
		if err := json.Unmarshal([]byte(v), &tags); err != nil {
			return bad(err)
		}
		s.Tags[id] = tags
		s.size += tagsBytes(tags)
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
