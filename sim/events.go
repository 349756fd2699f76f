package sim

// This file is the run's event queue: a binary heap of timed events in
// virtual time.

type eventKind uint8

const (
	evTick eventKind = iota + 1
	evSegment
	evArrival
	evBurst
	evAttempt
	evDone
	evReady
	evIncrease
	evApprove
	evTimeout // a Scaler's request reaches its timeout
	evDeploy  // a revision is deployed
	evTraffic // a traffic change is made
)

type event struct {
	at   int64
	seq  uint64
	kind eventKind
	idx  int32
	id   uint64
}

// eventHeap is a binary min-heap of events by (at, tick first, seq): the
// tick that closes second k-1 at t = k runs before anything else at t = k,
// so a second's snapshot and the autoscaler's view of it hold only what
// happened within it.
type eventHeap []event

func (h eventHeap) less(i, j int) bool {
	a, b := &h[i], &h[j]
	if a.at != b.at {
		return a.at < b.at
	}
	if ta, tb := a.kind == evTick, b.kind == evTick; ta != tb {
		return ta
	}
	return a.seq < b.seq
}

func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !s.less(i, p) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *eventHeap) pop() event {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && s.less(r, l) {
			m = r
		}
		if !s.less(m, i) {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}
