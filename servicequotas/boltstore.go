package servicequotas

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/state/bolt"
)

// Table is the table of Service Quotas' records in the embedded store and
// in an export (state.Record.Table). Its keys:
//
//	req/<id>          a request (requestRecord JSON)
//	applied/<key>     an applied value (appliedRecord JSON), key its appliedKey
//	tags/<key>        a quota ARN's tags (tagsRecord JSON)
//	#seq, #version    the order of requests; the applied values' version
const Table = "servicequotas"

// Record kinds: the prefixes of Table's keys.
const (
	recReq     = "req/"
	recApplied = "applied/"
	recTags    = "tags/"
	recSeq     = "#seq"
	recVersion = "#version"
)

// requestRecord is a request as a record: its fields and its seq.
type requestRecord struct {
	Request
	Seq    int64 `json:"seq"`
	Closed int64 `json:"closed_seq,omitempty"` // the order of closing
}

// appliedRecord is an applied value; Unmapped when a request of an
// unmapped account set it.
type appliedRecord struct {
	Value    float64 `json:"value"`
	Unmapped bool    `json:"unmapped,omitempty"`
}

// tagsRecord is a quota ARN's tags and the account that tagged it.
type tagsRecord struct {
	Account  string            `json:"account"`
	Unmapped bool              `json:"unmapped,omitempty"`
	Tags     map[string]string `json:"tags"`
}

// boltBackend is the memory backend kept on disk: everything is held in
// memory (its bounds are the memory backend's), and every change is
// written to the embedded store before the call returns; concurrent
// changes share a commit. A commit moves the records noted so far
// (memoryBackend.dirty) to unsaved and writes them as they are then;
// unsaved empties only once a commit succeeded, so that one rolled back
// and retried writes them again.
type boltBackend struct {
	*memoryBackend
	db      *bolt.DB
	unsaved map[string]bool // guarded by mu
	// tx is the transaction that last wrote unsaved: the other writes of
	// its group write only what they take from dirty. Guarded by mu.
	tx bolt.Transaction
}

// newBoltBackend loads what db holds and keeps it there from now on.
func newBoltBackend(db *bolt.DB) (*boltBackend, error) {
	m := newMemoryBackend()
	m.dirty = map[string]bool{}
	b := &boltBackend{memoryBackend: m, db: db, unsaved: map[string]bool{}}
	if err := db.Read(func(r *bolt.Reader) error {
		return loadRecords(m, func(fn func(k, v []byte) error) error { return r.Each(Table, "", fn) })
	}); err != nil {
		return nil, fmt.Errorf("servicequotas: loading the requests from %s: %w", db.Path(), err)
	}
	return b, nil
}

// loadRecords fills m from the records each gives, and rebuilds its
// indexes.
func loadRecords(m *memoryBackend, each func(fn func(k, v []byte) error) error) error {
	var reqs []*Request
	err := each(func(k, v []byte) error {
		key := string(k)
		bad := func(err error) error { return fmt.Errorf("record %q: %w", key, err) }
		switch {
		case key == recSeq || key == recVersion:
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return bad(err)
			}
			if key == recSeq {
				m.seq = n
			} else {
				m.ver = n
			}
		case strings.HasPrefix(key, recReq):
			var rec requestRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return bad(err)
			}
			rec.Request.seq, rec.Request.closed = rec.Seq, rec.Closed
			reqs = append(reqs, &rec.Request)
		case strings.HasPrefix(key, recApplied):
			var a appliedRecord
			if err := json.Unmarshal(v, &a); err != nil {
				return bad(err)
			}
			ak := strings.TrimPrefix(key, recApplied)
			m.vals[ak] = a.Value
			if a.Unmapped {
				m.unmappedVals[ak] = true
			}
		case strings.HasPrefix(key, recTags):
			var t tagsRecord
			if err := json.Unmarshal(v, &t); err != nil {
				return bad(err)
			}
			tk := strings.TrimPrefix(key, recTags)
			m.tagSets[tk] = t.Tags
			m.tagged[t.Account]++
			if t.Unmapped {
				m.unmappedTagged[tk] = true
			}
		default:
			return bad(fmt.Errorf("unknown kind"))
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Requests in the order they were made; closed ones in the order
	// they closed.
	slices.SortFunc(reqs, func(a, b *Request) int { return cmp.Compare(a.seq, b.seq) })
	var closed []*Request
	for _, r := range reqs {
		m.reqs[r.ID] = r
		a := m.accounts[r.Account]
		if a == nil {
			a = &memAccount{open: map[string]string{}}
			m.accounts[r.Account] = a
		}
		a.ids = append(a.ids, r.ID)
		if r.Status == StatusPending {
			a.open[r.openKey()] = r.ID
			if r.Unmapped {
				m.unmappedOpen++
			}
		} else {
			closed = append(closed, r)
		}
	}
	slices.SortFunc(closed, func(a, b *Request) int { return cmp.Compare(a.closed, b.closed) })
	for _, r := range closed {
		a := m.accounts[r.Account]
		a.closed = append(a.closed, r.ID)
		if r.Unmapped {
			m.unmappedClosed = append(m.unmappedClosed, r.ID)
		}
	}
	return nil
}

// write commits the changes noted so far and returns err, or the
// commit's error.
func (b *boltBackend) write(err error) error {
	if werr := b.db.Write(b.commit); werr != nil {
		return storeErr("write", werr)
	}
	return err
}

// commit writes every record noted so far, as memory holds it now.
func (b *boltBackend) commit(w *bolt.Writer) error {
	m := b.memoryBackend
	m.mu.Lock()
	defer m.mu.Unlock()
	// The first write of a transaction writes every unsaved record (a
	// group retried after a rollback must write them again); the others
	// only what they take.
	write := b.unsaved
	if b.tx == w.Transaction() {
		write = map[string]bool{}
	}
	b.tx = w.Transaction()
	for k := range m.dirty {
		b.unsaved[k] = true
		write[k] = true
	}
	clear(m.dirty)
	for k := range write {
		v, err := m.record(k)
		if err == nil {
			if v == nil {
				err = w.Delete(Table, k)
			} else {
				err = w.Put(Table, k, v)
			}
		}
		if err != nil {
			return err
		}
	}
	if err := w.Put(Table, recSeq, strconv.AppendInt(nil, m.seq, 10)); err != nil {
		return err
	}
	if err := w.Put(Table, recVersion, strconv.AppendInt(nil, m.ver, 10)); err != nil {
		return err
	}
	w.OnCommit(func() {
		m.mu.Lock()
		clear(b.unsaved)
		b.tx = bolt.Transaction{}
		m.mu.Unlock()
	})
	return nil
}

// record is the value of record k (m locked) as memory holds it; nil when
// it is gone.
func (m *memoryBackend) record(k string) ([]byte, error) {
	switch {
	case strings.HasPrefix(k, recReq):
		r := m.reqs[strings.TrimPrefix(k, recReq)]
		if r == nil {
			return nil, nil
		}
		return json.Marshal(requestRecord{Request: *r, Seq: r.seq, Closed: r.closed})
	case strings.HasPrefix(k, recApplied):
		ak := strings.TrimPrefix(k, recApplied)
		v, ok := m.vals[ak]
		if !ok {
			return nil, nil
		}
		return json.Marshal(appliedRecord{Value: v, Unmapped: m.unmappedVals[ak]})
	case strings.HasPrefix(k, recTags):
		tk := strings.TrimPrefix(k, recTags)
		t := m.tagSets[tk]
		if len(t) == 0 {
			return nil, nil
		}
		return json.Marshal(tagsRecord{Account: accountOf(tk), Unmapped: m.unmappedTagged[tk], Tags: t})
	}
	return nil, fmt.Errorf("servicequotas: record %q of no kind", k)
}

// accountOf is the account of an appliedKey: what precedes its region,
// service code and quota code.
func accountOf(key string) string {
	for range 3 {
		if i := strings.LastIndexByte(key, '|'); i >= 0 {
			key = key[:i]
		}
	}
	return key
}

func (b *boltBackend) create(ctx context.Context, r Request, e expect) error {
	if err := b.memoryBackend.create(ctx, r, e); err != nil {
		return err
	}
	return b.write(nil)
}

func (b *boltBackend) decide(ctx context.Context, id, status, reason string, now int64) (Request, error) {
	r, err := b.memoryBackend.decide(ctx, id, status, reason, now)
	if err != nil {
		return r, err
	}
	return r, b.write(nil)
}

func (b *boltBackend) set(ctx context.Context, key string, value float64) error {
	if err := b.memoryBackend.set(ctx, key, value); err != nil {
		return err
	}
	return b.write(nil)
}

func (b *boltBackend) tag(ctx context.Context, res tagRes, tags map[string]string) error {
	if err := b.memoryBackend.tag(ctx, res, tags); err != nil {
		return err
	}
	return b.write(nil)
}

func (b *boltBackend) untag(ctx context.Context, res tagRes, keys []string) error {
	if err := b.memoryBackend.untag(ctx, res, keys); err != nil {
		return err
	}
	return b.write(nil)
}
