package servicequotas

import (
	"cmp"
	"container/list"
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

// derivedTable holds what the embedded store derives from Table, so that
// a start reads neither the requests nor their indexes:
//
//	a NUL <account> NUL <id>   "": the account's requests
//	s NUL <seq>                <account> NUL <id>: every request by seq (the admin listing)
//	u NUL <closed seq>         <account> NUL <id>: unmapped closed requests, closed longest ago first
//	#unmapped-open             unmapped accounts' PENDING requests
//	#built                     the table is complete
//
// Seqs are 16 hex digits. It is written in the transaction of the
// records it indexes, left out of an export and rebuilt from the records
// when absent (after an import, or from a file of an earlier tollgate).
const derivedTable = bolt.DerivedPrefix + Table

const (
	idxAccount      = "a\x00"
	idxSeq          = "s\x00"
	idxUnmapped     = "u\x00"
	idxUnmappedOpen = "#unmapped-open"
	idxBuilt        = "#built"
)

// DefaultCacheRequests is how many requests the embedded store keeps in
// memory when Options.CacheRequests is 0.
const DefaultCacheRequests = 20_000

// boltBackend keeps Service Quotas in the embedded store, with the
// memory backend as a cache over it: an account's requests are read
// (from derivedTable's index of them) when the account is first used,
// and the least recently used accounts whose changes are all on disk are
// dropped while more than maxRequests are held. The applied values, the
// tags and the unmapped accounts' closed requests' order are read at
// start and kept: the limiter reads every applied value, and each is
// bounded by the memory backend's limits. Every change is written before
// the call returns; concurrent changes share a commit (bolt.Group).
type boltBackend struct {
	*memoryBackend
	db          *bolt.DB
	group       *bolt.Group[string]
	maxRequests int
	// Guarded by mu: the accounts memory holds, most recently used
	// first; the requests they hold as last counted; the accounts used
	// since (to count again).
	lru     *list.List
	elems   map[string]*list.Element
	held    int
	touched []string
}

// cachedAccount is the LRU entry of an account memory holds.
type cachedAccount struct {
	account string
	n       int // its requests (at least 1) when last counted in held
}

// newBoltBackend reads the applied values, the tags and the counters db
// holds, and each account's requests when first used. maxRequests 0
// means DefaultCacheRequests.
func newBoltBackend(db *bolt.DB, maxRequests int) (*boltBackend, error) {
	if maxRequests == 0 {
		maxRequests = DefaultCacheRequests
	}
	m := newMemoryBackend()
	b := &boltBackend{memoryBackend: m, db: db, maxRequests: maxRequests, lru: list.New(), elems: map[string]*list.Element{}}
	b.group = bolt.NewGroup(db, &m.mu, b.flush)
	m.disk = b
	if err := b.start(); err != nil {
		return nil, fmt.Errorf("servicequotas: reading the requests from %s: %w", db.Path(), err)
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
			m.closedAcct[r.ID] = r.Account
		}
	}
	return nil
}

// write commits the changes noted so far and returns err, or the
// commit's error; then drops what the cache holds beyond its bound.
func (b *boltBackend) write(err error) error {
	werr := b.group.Write()
	b.settle()
	if werr != nil {
		return storeErr("write", werr)
	}
	return err
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

func (b *boltBackend) get(ctx context.Context, id string) (Request, error) {
	defer b.settle()
	return b.memoryBackend.get(ctx, id)
}

func (b *boltBackend) account(ctx context.Context, account string) ([]Request, error) {
	defer b.settle()
	return b.memoryBackend.account(ctx, account)
}

func (b *boltBackend) page(ctx context.Context, f pageFilter) ([]Request, int64, error) {
	defer b.settle()
	return b.memoryBackend.page(ctx, f)
}

func (b *boltBackend) create(ctx context.Context, r Request, e expect) error {
	if err := b.memoryBackend.create(ctx, r, e); err != nil {
		b.settle()
		return err
	}
	return b.write(nil)
}

func (b *boltBackend) decide(ctx context.Context, id, status, reason string, now int64) (Request, error) {
	r, err := b.memoryBackend.decide(ctx, id, status, reason, now)
	if err != nil {
		b.settle()
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
