package replay

// This file is the sorting window's heap, of CloudTrail calls and of
// access-log requests alike.

// timed is what a timeHeap orders: a time, then a sequence number.
type timed interface{ key() (at int64, seq uint64) }

// timeHeap is a binary min-heap by (at, seq).
type timeHeap[T timed] []T

func (h timeHeap[T]) less(i, j int) bool {
	ai, si := h[i].key()
	aj, sj := h[j].key()
	if ai != aj {
		return ai < aj
	}
	return si < sj
}

func (h *timeHeap[T]) push(a T) {
	*h = append(*h, a)
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

func (h *timeHeap[T]) pop() T {
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
