package servicequotas

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/state"
	"github.com/tollgate/tollgate/state/bolt"
)

// seqKey is a seq as derivedTable's keys hold it: 16 hex digits, which
// sort as the numbers do.
func seqKey(n int64) string { return fmt.Sprintf("%016x", n) }

// start reads what every call may need: the order and version counters,
// the applied values, the tags and the unmapped accounts' counters,
// building derivedTable first if the file has none.
func (b *boltBackend) start() error {
	built, err := b.db.Has(derivedTable, idxBuilt)
	if err != nil {
		return err
	}
	if !built {
		if err := b.build(); err != nil {
			return err
		}
	}
	m := b.memoryBackend
	return b.db.Read(func(r *bolt.Reader) error {
		err := loadRecords(m, func(fn func(k, v []byte) error) error {
			for _, k := range []string{recSeq, recVersion} {
				if v := r.Get(Table, k); v != nil {
					if err := fn([]byte(k), v); err != nil {
						return err
					}
				}
			}
			if err := r.Each(Table, recApplied, fn); err != nil {
				return err
			}
			return r.Each(Table, recTags, fn)
		})
		if err != nil {
			return err
		}
		if v := r.Get(derivedTable, idxUnmappedOpen); v != nil {
			n, err := strconv.Atoi(string(v))
			if err != nil {
				return fmt.Errorf("record %s: %q: %w", idxUnmappedOpen, v, err)
			}
			m.unmappedOpen = n
		}
		return r.Each(derivedTable, idxUnmapped, func(_, v []byte) error {
			account, id, ok := strings.Cut(string(v), "\x00")
			if !ok {
				return fmt.Errorf("index entry %q: no account", v)
			}
			m.unmappedClosed = append(m.unmappedClosed, id)
			m.closedAcct[id] = account
			return nil
		})
	})
}

// indexed is what derivedTable indexes of a request.
type indexed struct {
	id, account    string
	seq, closed    int64
	unmapped, open bool
}

func indexOf(r *requestRecord) indexed {
	return indexed{id: r.ID, account: r.Account, seq: r.Seq, closed: r.Closed, unmapped: r.Unmapped, open: r.Status == StatusPending}
}

// put writes x's index entries.
func (x indexed) put(w *bolt.Writer) error {
	ref := []byte(x.account + "\x00" + x.id)
	err := w.Put(derivedTable, idxAccount+x.account+"\x00"+x.id, nil)
	if err == nil {
		err = w.Put(derivedTable, idxSeq+seqKey(x.seq), ref)
	}
	if err == nil && x.unmapped && !x.open {
		err = w.Put(derivedTable, idxUnmapped+seqKey(x.closed), ref)
	}
	return err
}

// delete removes x's index entries.
func (x indexed) delete(w *bolt.Writer) error {
	err := w.Delete(derivedTable, idxAccount+x.account+"\x00"+x.id)
	if err == nil {
		err = w.Delete(derivedTable, idxSeq+seqKey(x.seq))
	}
	if err == nil && x.unmapped && !x.open {
		err = w.Delete(derivedTable, idxUnmapped+seqKey(x.closed))
	}
	return err
}

// build writes derivedTable from the requests, reading each once.
func (b *boltBackend) build() error {
	var all []indexed
	if err := b.db.Read(func(r *bolt.Reader) error {
		return r.Each(Table, recReq, func(k, v []byte) error {
			var rec requestRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("record %q: %w", k, err)
			}
			all = append(all, indexOf(&rec))
			return nil
		})
	}); err != nil {
		return err
	}
	err := b.db.Write(func(w *bolt.Writer) error {
		for _, p := range []string{idxAccount, idxSeq, idxUnmapped} {
			if err := w.DeletePrefix(derivedTable, p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	var recs []state.Record
	open := 0
	for _, x := range all {
		ref := x.account + "\x00" + x.id
		recs = append(recs, state.Record{Table: derivedTable, Key: idxAccount + ref},
			state.Record{Table: derivedTable, Key: idxSeq + seqKey(x.seq), Value: ref})
		if x.unmapped && !x.open {
			recs = append(recs, state.Record{Table: derivedTable, Key: idxUnmapped + seqKey(x.closed), Value: ref})
		}
		if x.unmapped && x.open {
			open++
		}
	}
	if err := b.db.Fill(recs); err != nil {
		return err
	}
	return b.db.Write(func(w *bolt.Writer) error {
		if err := w.Put(derivedTable, idxUnmappedOpen, strconv.AppendInt(nil, int64(open), 10)); err != nil {
			return err
		}
		return w.Put(derivedTable, idxBuilt, []byte("1"))
	})
}

// readRequest reads request id from disk; nil when absent.
func readRequest(r *bolt.Reader, id string) (*Request, error) {
	v := r.Get(Table, recReq+id)
	if v == nil {
		return nil, nil
	}
	var rec requestRecord
	if err := json.Unmarshal(v, &rec); err != nil {
		return nil, fmt.Errorf("record %q: %w", recReq+id, err)
	}
	rec.Request.seq, rec.Request.closed = rec.Seq, rec.Closed
	return &rec.Request, nil
}

// need makes account's requests held in memory and the most recently
// used, reading them from disk if they are not (mu held).
func (b *boltBackend) need(account string) error {
	b.touched = append(b.touched, account)
	if e := b.elems[account]; e != nil {
		b.lru.MoveToFront(e)
		return nil
	}
	var reqs []*Request
	prefix := idxAccount + account + "\x00"
	err := b.db.Read(func(r *bolt.Reader) error {
		return r.Each(derivedTable, prefix, func(k, _ []byte) error {
			req, err := readRequest(r, string(k[len(prefix):]))
			if err == nil && req == nil {
				err = fmt.Errorf("index entry %q: no such request", k)
			}
			if err == nil {
				reqs = append(reqs, req)
			}
			return err
		})
	})
	if err != nil {
		return storeErr("read", fmt.Errorf("%s: account %s: %w", b.db.Path(), account, err))
	}
	m := b.memoryBackend
	if len(reqs) > 0 {
		slices.SortFunc(reqs, func(x, y *Request) int { return cmp.Compare(x.seq, y.seq) })
		a := &memAccount{open: map[string]string{}}
		var closed []*Request
		for _, r := range reqs {
			m.reqs[r.ID] = r
			a.ids = append(a.ids, r.ID)
			if r.Status == StatusPending {
				a.open[r.openKey()] = r.ID
			} else {
				closed = append(closed, r)
			}
		}
		slices.SortFunc(closed, func(x, y *Request) int { return cmp.Compare(x.closed, y.closed) })
		for _, r := range closed {
			a.closed = append(a.closed, r.ID)
		}
		m.accounts[account] = a
	}
	b.elems[account] = b.lru.PushFront(&cachedAccount{account: account, n: max(1, len(reqs))})
	b.held += max(1, len(reqs))
	return nil
}

// needID makes the account of request id held in memory (mu held). A
// request memory does not hold whose account it holds is gone (its
// removal may not be on disk yet).
func (b *boltBackend) needID(id string) error {
	m := b.memoryBackend
	if r := m.reqs[id]; r != nil {
		return b.need(r.Account)
	}
	var r *Request
	if err := b.db.Read(func(rd *bolt.Reader) (err error) {
		r, err = readRequest(rd, id)
		return err
	}); err != nil {
		return storeErr("read", fmt.Errorf("%s: %w", b.db.Path(), err))
	}
	if r == nil || b.elems[r.Account] != nil {
		return nil
	}
	return b.need(r.Account)
}

// pageDisk returns the requests f selects of the accounts memory does not
// hold, newest first, at most f.limit+1 (mu held): those accounts have
// no change that is not on disk.
func (b *boltBackend) pageDisk(f pageFilter) ([]*Request, error) {
	before := ""
	if f.before > 0 {
		before = idxSeq + seqKey(f.before)
	}
	var out []*Request
	err := b.db.Read(func(r *bolt.Reader) error {
		return r.EachBefore(derivedTable, idxSeq, before, func(_, v []byte) error {
			account, id, ok := strings.Cut(string(v), "\x00")
			if !ok {
				return fmt.Errorf("index entry %q: no account", v)
			}
			if b.elems[account] != nil {
				return nil
			}
			req, err := readRequest(r, id)
			if err != nil || req == nil {
				return err
			}
			if f.statuses == nil || f.statuses[req.Status] {
				out = append(out, req)
				if len(out) > f.limit {
					return errPageFull
				}
			}
			return nil
		})
	})
	if err != nil && err != errPageFull {
		return nil, storeErr("read", fmt.Errorf("%s: %w", b.db.Path(), err))
	}
	return out, nil
}

// errPageFull stops the walk of a page that is full.
var errPageFull = fmt.Errorf("page full")

// settle counts again the accounts used, and drops the least recently
// used accounts whose changes are all on disk while memory holds more
// than maxRequests requests.
func (b *boltBackend) settle() {
	m := b.memoryBackend
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, account := range b.touched {
		e := b.elems[account]
		if e == nil {
			continue
		}
		c := e.Value.(*cachedAccount)
		n := 1
		if a := m.accounts[account]; a != nil {
			n = max(1, len(a.ids))
		}
		b.held += n - c.n
		c.n = n
	}
	b.touched = b.touched[:0]
	for e := b.lru.Back(); e != nil && b.held > b.maxRequests; {
		prev := e.Prev()
		if c := e.Value.(*cachedAccount); !b.group.Busy(c.account) {
			if a := m.accounts[c.account]; a != nil {
				for _, id := range a.ids {
					delete(m.reqs, id)
				}
				delete(m.accounts, c.account)
			}
			b.lru.Remove(e)
			delete(b.elems, c.account)
			b.held -= c.n
		}
		e = prev
	}
}

// flush writes the records of changes as memory holds them now, their
// index entries, and the counters (mu held).
func (b *boltBackend) flush(w *bolt.Writer, changes map[string]string) error {
	m := b.memoryBackend
	for k := range changes {
		var err error
		if id, ok := strings.CutPrefix(k, recReq); ok {
			err = b.flushRequest(w, id)
		} else {
			var v []byte
			if v, err = m.record(k); err == nil && v == nil {
				err = w.Delete(Table, k)
			} else if err == nil {
				err = w.Put(Table, k, v)
			}
		}
		if err != nil {
			return err
		}
	}
	for _, kv := range []struct {
		table, key string
		n          int64
	}{{Table, recSeq, m.seq}, {Table, recVersion, m.ver}, {derivedTable, idxUnmappedOpen, int64(m.unmappedOpen)}} {
		if err := w.Put(kv.table, kv.key, strconv.AppendInt(nil, kv.n, 10)); err != nil {
			return err
		}
	}
	return nil
}

// flushRequest writes request id as memory holds it, or removes it, with
// its index entries.
func (b *boltBackend) flushRequest(w *bolt.Writer, id string) error {
	if old := w.Get(Table, recReq+id); old != nil {
		var rec requestRecord
		if err := json.Unmarshal(old, &rec); err != nil {
			return fmt.Errorf("record %q: %w", recReq+id, err)
		}
		if err := indexOf(&rec).delete(w); err != nil {
			return err
		}
	}
	r := b.memoryBackend.reqs[id]
	if r == nil {
		return w.Delete(Table, recReq+id)
	}
	rec := requestRecord{Request: *r, Seq: r.seq, Closed: r.closed}
	v, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := w.Put(Table, recReq+id, v); err != nil {
		return err
	}
	return indexOf(&rec).put(w)
}
