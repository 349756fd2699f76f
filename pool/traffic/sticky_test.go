package traffic

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// A sticky request's key is its header's or cookie's value, or the
// address its connection came from (never X-Forwarded-For); a request
// without it has none and is split per request.
func TestStickyKey(t *testing.T) {
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = "192.0.2.7:51234"
	req.Header.Set("X-User-Id", "alice")
	req.Header.Set("X-Forwarded-For", "198.51.100.1")
	req.AddCookie(&http.Cookie{Name: "session", Value: "s-1"})
	bare := httptest.NewRequest(http.MethodGet, "/", nil)
	bare.RemoteAddr = "[2001:db8::1]:443"
	for _, c := range []struct {
		s    Sticky
		r    *http.Request
		want string
		ok   bool
	}{
		{Sticky{Header: "X-User-Id"}, req, "alice", true},
		{Sticky{Header: "x-user-id"}, req, "alice", true},
		{Sticky{Cookie: "session"}, req, "s-1", true},
		{Sticky{ClientAddress: true}, req, "192.0.2.7", true},
		{Sticky{ClientAddress: true}, bare, "2001:db8::1", true},
		{Sticky{Header: "X-User-Id"}, bare, "", false},
		{Sticky{Cookie: "session"}, bare, "", false},
	} {
		got, ok := c.s.Key(c.r)
		if got != c.want || ok != c.ok {
			t.Errorf("%+v: key %q %v, want %q %v", c.s, got, ok, c.want, c.ok)
		}
	}
}

func TestStickyCheck(t *testing.T) {
	for _, s := range []Sticky{{}, {Header: "X-User-Id"}, {Cookie: "session"}, {ClientAddress: true}} {
		if err := s.Check("s"); err != nil {
			t.Errorf("%+v: %v", s, err)
		}
	}
	for _, s := range []Sticky{{Header: "X-User-Id", Cookie: "session"}, {Cookie: "a", ClientAddress: true}, {Header: "X User"}, {Cookie: "a;b"}} {
		if err := s.Check("s"); !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("%+v: %v, want ErrInvalidSpec", s, err)
		}
	}
}

// The sticky slots lay the revisions oldest first whatever the block's
// order, one revision's entries together: 10 % to the new one listed
// first gives it the last 10 slots.
func TestKeyedSlotsOldestFirst(t *testing.T) {
	old, mid, latest := &rev{name: "s-00001"}, &rev{name: "s-00002"}, &rev{name: "s-00003"}
	revs := []*rev{old, mid, latest}
	slots, err := keyedSlots(revs, []*rev{latest, old}, []int{10, 90})
	if err != nil {
		t.Fatal(err)
	}
	for s, rv := range slots {
		if want := map[bool]*rev{true: old, false: latest}[s < 90]; rv != want {
			t.Fatalf("slot %d: %s, want %s", s, rv.name, want.name)
		}
	}
	slots, err = keyedSlots(revs, []*rev{latest, old, mid, latest}, []int{10, 30, 40, 20})
	if err != nil {
		t.Fatal(err)
	}
	for s, rv := range slots {
		want := latest
		switch {
		case s < 30:
			want = old
		case s < 70:
			want = mid
		}
		if rv != want {
			t.Fatalf("slot %d: %s, want %s", s, rv.name, want.name)
		}
	}
	if _, err := keyedSlots(revs, []*rev{old}, []int{90}); err == nil {
		t.Error("percents summing to 90 laid out")
	}
}

// rev stands for a revision: NewRouting lays out the pool's own type.
type rev struct{ name string }
