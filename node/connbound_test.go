package node

import (
	"errors"
	"net"
	"testing"
	"time"
)

func TestConnBound(t *testing.T) {
	for _, c := range []struct {
		limit uint64
		want  int
	}{
		{20000, 15000},    // this machine's: 5,000 kept for tollgate
		{1024, 768},       // a shell's default
		{500, 250},        // too small to keep 256: half
		{100000, 75000},   // raised by the operator
		{0, 0},            // unknown
		{1 << 40, 0},      // unlimited in effect
		{1 << 20, 786432}, // Linux's nr_open default
	} {
		if got := connBound(c.limit); got != c.want {
			t.Errorf("connBound(%d) = %d, want %d", c.limit, got, c.want)
		}
	}
}

// TestBoundedListenerWaitsForAClose: at the bound a new connection is
// not accepted (it waits in the backlog) until an accepted one closes;
// Close ends an Accept waiting for a slot.
func TestBoundedListenerWaitsForAClose(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := boundListener(inner, 2)
	accepted := make(chan net.Conn, 3)
	acceptErr := make(chan error, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				acceptErr <- err
				return
			}
			accepted <- c
		}
	}()
	var clients []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", inner.Addr().String()) // the kernel completes it: the backlog
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	first, second := <-accepted, <-accepted
	select {
	case <-accepted:
		t.Fatal("a third connection was accepted with a bound of 2")
	case <-time.After(300 * time.Millisecond):
	}
	first.Close()
	first.Close() // a second close frees no second slot
	third := <-accepted
	defer second.Close()
	defer third.Close()
	// At the bound again (second and third open), whatever the double
	// close did: a fourth waits, and Close ends the wait.
	fourth, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer fourth.Close()
	select {
	case <-accepted:
		t.Fatal("a fourth connection was accepted with two open and a bound of 2 (a double close freed two slots)")
	case <-time.After(300 * time.Millisecond):
	}
	ln.Close()
	if err := <-acceptErr; !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close = %v, want net.ErrClosed", err)
	}
}
