package main

import (
	"errors"
	"testing"
)

func TestErrorKeyDropsAddresses(t *testing.T) {
	for in, want := range map[string]string{
		`Get "http://127.0.0.1:37208/crowd/?latency=1s": read tcp 127.0.0.1:32772->127.0.0.1:37208: read: connection reset by peer`: "error read tcp ADDR->ADDR: read: connection reset by peer",
		`Get "http://127.0.0.1:1/": EOF`:                                     "error EOF",
		`Get "http://127.0.0.1:1/": net/http: server closed idle connection`: "error server closed idle connection",
	} {
		if got := errorKey(errors.New(in)); got != want {
			t.Errorf("errorKey(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestStatsMergeKeepsUnsetTimesOut(t *testing.T) {
	var s stats
	s.merge(stats{Count: 1, EndedMin: 5, EndedMax: 5, ConnMin: 0, ConnMax: 0})
	s.merge(stats{Count: 2, EndedMin: 3, EndedMax: 9, ConnMin: 2, ConnMax: 4, WroteMin: 3, WroteMax: 4})
	want := stats{Count: 3, EndedMin: 3, EndedMax: 9, ConnMin: 2, ConnMax: 4, WroteMin: 3, WroteMax: 4}
	if s != want {
		t.Errorf("merged %+v, want %+v", s, want)
	}
}
