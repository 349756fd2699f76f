package node

import (
	"errors"
	"io"
	"net"
	"strings"
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

// TestBoundedConnectionsHalfClose: a connection accepted through the
// bound and the header clock can be half-closed, as net/http does before
// it closes a connection it refused (so the client reads the answer, not
// a reset): the client reads the answer to its end, and what it sends
// after still arrives.
func TestBoundedConnectionsHalfClose(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := headerClockListener{Listener: boundListener(inner, 2), idle: time.Minute, header: time.Minute}
	defer ln.Close()
	client, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	cw, ok := server.(interface{ CloseWrite() error })
	if !ok {
		t.Fatalf("%T has no CloseWrite", server)
	}
	if _, err := server.Write([]byte("HTTP/1.1 413 Request Entity Too Large\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if err := cw.CloseWrite(); err != nil {
		t.Fatalf("CloseWrite: %v", err)
	}
	_ = client.SetReadDeadline(time.Now().Add(30 * time.Second))
	answer, err := io.ReadAll(client)
	if err != nil || !strings.HasPrefix(string(answer), "HTTP/1.1 413") {
		t.Fatalf("the client read %q, %v; want the 413 and then EOF", answer, err)
	}
	if _, err := client.Write([]byte("rest of the body")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	_ = server.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(server, buf); err != nil || string(buf) != "rest of the body" {
		t.Fatalf("after the half-close the server read %q, %v", buf, err)
	}
}
