package replay

// This file is the sorting window's heap, of CloudTrail calls and of
// access-log requests alike.

// timed is one entry of a timeHeap: its time and sequence number, by
// which it is ordered, and its value.
type timed[T any] struct {
	at  int64
	seq uint64
	v   T
}

// timeHeap is a binary min-heap by (at, seq). Its entries hold their keys
// (rather than a method giving them) so that comparisons are inlined.
type timeHeap[T any] []timed[T]

func (h timeHeap[T]) less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}

// minAt is the time of the first entry; the heap must not be empty.
func (h timeHeap[T]) minAt() int64 { return h[0].at }

func (h *timeHeap[T]) push(at int64, seq uint64, v T) {
	*h = append(*h, timed[T]{at, seq, v})
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s.less(i, p) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *timeHeap[T]) pop() timed[T] {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if rr := l + 1; rr < n && s.less(rr, l) {
			m = rr
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
