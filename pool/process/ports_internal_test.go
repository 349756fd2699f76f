package process

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestPortCandidates(t *testing.T) {
	for _, c := range []struct {
		lo, hi int
		want   []portRange
	}{
		{32768, 60999, []portRange{{20000, 32000}}},                 // Linux's default
		{49152, 65535, []portRange{{20000, 32000}}},                 // IANA's
		{10000, 65535, []portRange{{1024, 10000}}},                  // wide: below it
		{1024, 65535, nil},                                          // everything is ephemeral
		{25000, 31500, []portRange{{20000, 25000}, {31501, 32000}}}, // inside the dynamic range
		{20500, 31800, []portRange{{1024, 20500}, {31801, 65536}}},  // too little of it left
	} {
		if got := portCandidates(c.lo, c.hi); !reflect.DeepEqual(got, c.want) {
			t.Errorf("portCandidates(%d, %d) = %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
	seen := map[int]bool{}
	for range 1000 {
		p := pickPort([]portRange{{100, 102}, {200, 201}})
		if p != 100 && p != 101 && p != 200 {
			t.Fatalf("pickPort = %d, outside its ranges", p)
		}
		seen[p] = true
	}
	if len(seen) != 3 {
		t.Errorf("pickPort over 1000 picks hit %v, want all three ports", seen)
	}
}

// TestRunnersNeverShareAPort: a port given to one Runner's instance is
// not given to another Runner's while the first holds it (an instance
// listens only a cold start later, so the port still binds meanwhile).
// Not parallel: it narrows the candidate ports of the whole package.
func TestRunnersNeverShareAPort(t *testing.T) {
	var ranges []portRange
	for range 3 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		ranges = append(ranges, portRange{p, p + 1})
	}
	was := candidatePorts
	candidatePorts = func() []portRange { return ranges }
	t.Cleanup(func() { candidatePorts = was })

	a, b := &Runner{}, &Runner{}
	held := map[int]bool{}
	for range len(ranges) {
		p, err := a.freePort()
		if err != nil {
			t.Fatalf("runner a: %v", err)
		}
		held[p] = true
	}
	if len(held) != len(ranges) {
		t.Fatalf("runner a got ports %v, want %d different", held, len(ranges))
	}
	if p, err := b.freePort(); err == nil {
		t.Fatalf("runner b was given port %d, which runner a holds (%v)", p, held)
	}
	for p := range held {
		a.releasePort(p)
	}
	p, err := b.freePort()
	if err != nil {
		t.Fatalf("runner b, once a released its ports: %v", err)
	}
	b.releasePort(p)
}

// TestPortReservedByAnotherProcess: a port another process (another
// tollgate) holds is not handed out here, though it binds; once that
// process is killed (SIGKILL: no clean release), it can be again; a
// clean release removes the port's file.
func TestPortReservedByAnotherProcess(t *testing.T) {
	dir, err := hostPortsDir()
	if err != nil {
		t.Skipf("no host-wide port reservations here: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	child := exec.Command(os.Args[0], "-test.run=^TestHelperHoldPort$")
	child.Env = append(os.Environ(), "TOLLGATE_TEST_HOLD_PORT="+strconv.Itoa(port))
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := child.StdinPipe() // the child holds the port until it ends
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "held" {
		t.Fatalf("the helper process said %q, %v", line, err)
	}
	set := portSet{held: map[int]*os.File{}, dir: hostPortsDir}
	if ok, err := set.hold(port); ok || err != nil {
		t.Fatalf("port %d, which another process holds, was held here too (%v, %v)", port, ok, err)
	}
	_ = child.Process.Kill()
	_ = child.Wait()
	ok, err := set.hold(port)
	if !ok || err != nil {
		t.Fatalf("port %d after its holder was killed: %v, %v", port, ok, err)
	}
	file := filepath.Join(dir, strconv.Itoa(port))
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("a held port has no file: %v", err)
	}
	set.release(port)
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the file of a released port is left: %v", err)
	}
}

// TestHelperHoldPort is TestPortReservedByAnotherProcess's other
// process: it holds the port named in its environment until its stdin
// ends.
func TestHelperHoldPort(t *testing.T) {
	port, err := strconv.Atoi(os.Getenv("TOLLGATE_TEST_HOLD_PORT"))
	if err != nil {
		t.Skip("the helper process of TestPortReservedByAnotherProcess")
	}
	set := portSet{held: map[int]*os.File{}, dir: hostPortsDir}
	if ok, err := set.hold(port); !ok || err != nil {
		fmt.Println("not held:", ok, err)
		return
	}
	fmt.Println("held")
	_, _ = io.Copy(io.Discard, os.Stdin)
}
