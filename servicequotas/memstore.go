package servicequotas

import (
	"cmp"
	"context"
	"slices"
	"sync"
)

// memoryBackend keeps the store in this process, with the same indexes
// and bounds as the Redis one.
type memoryBackend struct {
	mu       sync.Mutex
	seq      int64
	ver      int64
	reqs     map[string]*Request
	accounts map[string]*memAccount
	// unmappedOpen counts unmapped accounts' PENDING requests;
	// unmappedClosed lists their closed ones, closed longest ago first.
	unmappedOpen   int
	unmappedClosed []string
	vals           map[string]float64
	unmappedVals   map[string]bool // applied keys an unmapped request set
	// tagSets are the tags of quota ARNs by tagRes.key; tagged counts
	// each account's tagged ARNs; unmappedTagged are the keys unmapped
	// accounts tagged.
	tagSets        map[string]map[string]string
	tagged         map[string]int
	unmappedTagged map[string]bool
	// closedAcct is the account of each of unmappedClosed.
	closedAcct map[string]string
	// disk, when not nil, is the embedded store this backend caches: it
	// holds the requests of the accounts it read (see need), is told of
	// every change (note), and the requests of the others are on disk.
	disk *boltBackend
}

// note records that the record key (recReq, recApplied or recTags and
// an id) of owner (an account, "" for the records every node reads)
// changed, for the embedded store to write.
func (m *memoryBackend) note(kind, id, owner string) {
	if m.disk != nil {
		m.disk.group.Note(kind+id, owner)
	}
}

// need reads account's requests from disk unless memory holds them (m.mu
// held).
func (m *memoryBackend) need(account string) error {
	if m.disk == nil {
		return nil
	}
	return m.disk.need(account)
}

// needID reads the requests of request id's account from disk unless
// memory holds them (m.mu held); a request on disk only is then in reqs.
func (m *memoryBackend) needID(id string) error {
	if m.disk == nil {
		return nil
	}
	return m.disk.needID(id)
}

// needOldest reads the account of the unmapped request closed longest
// ago when closing one more would forget it (m.mu held).
func (m *memoryBackend) needOldest() error {
	if len(m.unmappedClosed) < MaxClosedUnmapped {
		return nil
	}
	return m.need(m.closedAcct[m.unmappedClosed[0]])
}

type memAccount struct {
	ids    []string          // every request, oldest first
	open   map[string]string // Request.openKey -> id
	closed []string          // closed requests, closed longest ago first
}

func newMemoryBackend() *memoryBackend {
	return &memoryBackend{reqs: map[string]*Request{}, accounts: map[string]*memAccount{},
		vals: map[string]float64{}, unmappedVals: map[string]bool{},
		tagSets: map[string]map[string]string{}, tagged: map[string]int{}, unmappedTagged: map[string]bool{},
		closedAcct: map[string]string{}}
}

func (m *memoryBackend) create(_ context.Context, r Request, e expect) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.need(r.Account); err != nil {
		return err
	}
	if r.Unmapped && r.Status != StatusPending {
		if err := m.needOldest(); err != nil {
			return err
		}
	}
	key := r.applied()
	v, set := m.vals[key]
	if v != e.value || set != e.set {
		return errRetry
	}
	a := m.accounts[r.Account]
	if a != nil {
		if id, ok := a.open[r.openKey()]; ok {
			return errOpenExists(id)
		}
		if len(a.open) >= MaxOpenPerAccount {
			return errTooManyOpen(len(a.open))
		}
	}
	if r.Unmapped && r.Status == StatusPending && m.unmappedOpen >= MaxOpenUnmapped {
		return errUnmappedBudget()
	}
	if r.Unmapped && r.Status == StatusApproved && !set && len(m.unmappedVals) >= MaxAppliedUnmapped {
		return errUnmappedApplied()
	}
	if a == nil {
		a = &memAccount{open: map[string]string{}}
		m.accounts[r.Account] = a
	}
	m.seq++
	r.seq = m.seq
	m.reqs[r.ID] = &r
	m.note(recReq, r.ID, r.Account)
	a.ids = append(a.ids, r.ID)
	if r.Status == StatusPending {
		a.open[r.openKey()] = r.ID
		if r.Unmapped {
			m.unmappedOpen++
		}
		return nil
	}
	m.close(a, &r)
	return nil
}

// close files a request just closed, applies an approved value and
// forgets what is now beyond the bounds.
func (m *memoryBackend) close(a *memAccount, r *Request) {
	if r.Status == StatusApproved {
		m.note(recApplied, r.applied(), "")
		m.vals[r.applied()] = r.DesiredValue
		if r.Unmapped {
			m.unmappedVals[r.applied()] = true
		}
		m.ver++
	}
	m.seq++ // as in Redis, closing takes a number of the same counter
	r.closed = m.seq
	a.closed = append(a.closed, r.ID)
	if r.Unmapped {
		m.unmappedClosed = append(m.unmappedClosed, r.ID)
		m.closedAcct[r.ID] = r.Account
	}
	for len(a.closed) > MaxClosedPerAccount {
		m.forget(a.closed[0])
	}
	for len(m.unmappedClosed) > MaxClosedUnmapped {
		m.forget(m.unmappedClosed[0])
	}
}

// forget removes a closed request from the store and its indexes.
func (m *memoryBackend) forget(id string) {
	r := m.reqs[id]
	delete(m.reqs, id)
	delete(m.closedAcct, id)
	m.note(recReq, id, r.Account)
	a := m.accounts[r.Account]
	drop := func(ids []string) []string {
		if i := slices.Index(ids, id); i >= 0 {
			return slices.Delete(ids, i, i+1)
		}
		return ids
	}
	a.ids = drop(a.ids)
	a.closed = drop(a.closed)
	if r.Unmapped {
		m.unmappedClosed = drop(m.unmappedClosed)
	}
	if len(a.ids) == 0 {
		delete(m.accounts, r.Account)
	}
}

func (m *memoryBackend) decide(_ context.Context, id, status, reason string, now int64) (Request, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.needID(id); err != nil {
		return Request{}, err
	}
	r, ok := m.reqs[id]
	if !ok {
		return Request{}, errNotFound
	}
	if r.Status != StatusPending {
		return *r, errNotPending
	}
	if r.Unmapped {
		if err := m.needOldest(); err != nil {
			return Request{}, err
		}
	}
	a := m.accounts[r.Account]
	delete(a.open, r.openKey())
	if r.Unmapped {
		m.unmappedOpen--
	}
	r.Status, r.Reason, r.LastUpdated = status, reason, now
	m.note(recReq, id, r.Account)
	out := *r
	m.close(a, r)
	return out, nil
}

func (m *memoryBackend) get(_ context.Context, id string) (Request, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.needID(id); err != nil {
		return Request{}, err
	}
	r, ok := m.reqs[id]
	if !ok {
		return Request{}, errNotFound
	}
	return *r, nil
}

func (m *memoryBackend) account(_ context.Context, account string) ([]Request, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.need(account); err != nil {
		return nil, err
	}
	a := m.accounts[account]
	if a == nil {
		return nil, nil
	}
	out := make([]Request, 0, len(a.ids))
	for i := len(a.ids) - 1; i >= 0; i-- {
		out = append(out, *m.reqs[a.ids[i]])
	}
	return out, nil
}

func (m *memoryBackend) page(_ context.Context, f pageFilter) ([]Request, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var sel []*Request
	keep := func(r *Request) {
		if (f.statuses == nil || f.statuses[r.Status]) && (f.before == 0 || r.seq < f.before) {
			sel = append(sel, r)
		}
	}
	if f.account != "" {
		if err := m.need(f.account); err != nil {
			return nil, 0, err
		}
		if a := m.accounts[f.account]; a != nil {
			for _, id := range a.ids {
				keep(m.reqs[id])
			}
		}
	} else {
		for _, r := range m.reqs {
			keep(r)
		}
		if m.disk != nil {
			// The accounts memory does not hold: their requests are on
			// disk, as they were when last written.
			disk, err := m.disk.pageDisk(f)
			if err != nil {
				return nil, 0, err
			}
			sel = append(sel, disk...)
		}
	}
	slices.SortFunc(sel, func(x, y *Request) int { return cmp.Compare(y.seq, x.seq) })
	var next int64
	if len(sel) > f.limit {
		sel = sel[:f.limit]
		next = sel[f.limit-1].seq
	}
	out := make([]Request, len(sel))
	for i, r := range sel {
		out[i] = *r
	}
	return out, next, nil
}

func (m *memoryBackend) values(_ context.Context, keys []string) (map[string]float64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]float64, len(keys))
	for _, k := range keys {
		if v, ok := m.vals[k]; ok {
			out[k] = v
		}
	}
	return out, nil
}

func (m *memoryBackend) applied(context.Context) (int64, map[string]float64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]float64, len(m.vals))
	for k, v := range m.vals {
		out[k] = v
	}
	return m.ver, out, nil
}

func (m *memoryBackend) version(context.Context) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ver, nil
}

func (m *memoryBackend) set(_ context.Context, key string, value float64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.note(recApplied, key, "")
	if value == 0 {
		delete(m.vals, key)
	} else {
		m.vals[key] = value
	}
	delete(m.unmappedVals, key)
	m.ver++
	return nil
}
