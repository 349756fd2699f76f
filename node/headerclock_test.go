package node

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/logtest"
)

// headerClockNode is a node of the ECS preset, run until the test ends.
func headerClockNode(t *testing.T) *Node {
	t.Helper()
	var logs logtest.Buffer
	n := newTestNode(t, &logs, Options{ConfigPath: writeFile(t, t.TempDir(), "tollgate.yaml", "services:\n  - preset: ecs\n")})
	run(t, n, &logs)
	return n
}

// TestAConnectionOpenedAheadIsAnswered: a client that opened a connection
// ahead of its request (Go's transport and the AWS SDKs do when requests
// outnumber idle connections, and keep the spare ones for 90 s) and sends
// the request more than readHeaderTimeout later is answered. The header
// clock starts at the request's first byte; before it the connection is
// idle, kept idleTimeout as a keep-alive one is. Timed from the accept,
// as net/http times a connection's first request, such a connection was
// closed at 5 s, and the request written to it as the close crossed was
// lost ("connection reset by peer", not retried: a POST), which
// TestReplayAgreesWithServe's second burst, 5 s after its first, saw in
// loaded runs.
func TestAConnectionOpenedAheadIsAnswered(t *testing.T) {
	t.Parallel() // a real-time wait past readHeaderTimeout
	n := headerClockNode(t)
	c, err := net.Dial("tcp", n.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(readHeaderTimeout + 2*time.Second)
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: tollgate\r\n\r\n"); err != nil {
		t.Fatalf("writing the request %v after connecting: %v", readHeaderTimeout+2*time.Second, err)
	}
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("a request sent %v after connecting got no answer: %v", readHeaderTimeout+2*time.Second, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz: %s", resp.Status)
	}
}

// TestHeadersThatTrickleAreCut: a request whose headers began but do not
// end is cut readHeaderTimeout after its first byte, as slowloris is, not
// kept the idle timeout an unused connection gets.
func TestHeadersThatTrickleAreCut(t *testing.T) {
	t.Parallel() // a real-time wait for readHeaderTimeout
	n := headerClockNode(t)
	c, err := net.Dial("tcp", n.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: tol"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(idleTimeout / 2)) // the idle timeout would not cut it by then
	_, err = io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a request whose headers stopped halfway still open %v later", time.Since(start))
	}
	if took := time.Since(start); took < readHeaderTimeout-time.Second {
		t.Fatalf("cut after %v, before the %v its headers are given", took, readHeaderTimeout)
	}
}
