package main

import (
	"net"
	"slices"
	"testing"
)

// -port-base: the first free ports of the range, in order, skipping one in
// use, and an error once the range is spent.
func TestPortRange(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	b := busy.Addr().(*net.TCPAddr).Port
	r := portRange{next: b, end: b + 3}
	got1, err1 := r.take()
	got2, err2 := r.take()
	if err1 != nil || err2 != nil {
		// A port next to b may be another process's: skip rather than fail.
		t.Skipf("ports next to %d in use: %v, %v", b, err1, err2)
	}
	if got1 != b+1 || got2 != b+2 {
		t.Errorf("took %d, %d from %d (in use) on; want %d, %d", got1, got2, b, b+1, b+2)
	}
	if p, err := r.take(); err == nil {
		t.Errorf("took %d past the range's end", p)
	}
	k := portRange{}
	if p, err := k.take(); err != nil || p == 0 {
		t.Errorf("kernel's pick: %d, %v", p, err)
	}
}

func TestCommandOnCPUs(t *testing.T) {
	if c := command("", "yes", "a"); len(c.Args) != 2 || c.Args[0] != "yes" {
		t.Errorf("unpinned: %q", c.Args)
	}
	c := command("0,1", "redis-server", "--port", "7")
	if want := []string{"taskset", "-c", "0,1", "redis-server", "--port", "7"}; !slices.Equal(c.Args, want) {
		t.Errorf("pinned: %q, want %q", c.Args, want)
	}
}
