package node

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
)

// The HTTP listener accepts at most a share of the process's open-file
// limit as connections, and leaves the rest of the limit to what
// tollgate opens itself: instances' processes (pipes, a supervisor's
// socket), the proxy's connections to them (one per proxied request
// over HTTP/1), the store's, the config file. Without it a crowd of
// clients takes every descriptor, and then nothing they wait for can
// start: with 20,000 clients and a limit of 20,000, the instance they
// waited for failed to start ("pipe2: too many open files") and 19,951
// were answered 503 (bench/autoscale-long.sh crowd). At the bound the
// listener stops accepting until a connection closes: the kernel holds
// the next ones in the listen backlog (net.core.somaxconn), and beyond
// that the clients' SYNs are retransmitted, so they wait rather than
// fail. http.Server does the same at EMFILE, but only after the
// descriptors are gone.
const (
	// connShareNum / connShareDen of the open-file limit may be
	// connections.
	connShareNum, connShareDen = 3, 4
	// minReserve is the fewest descriptors kept for tollgate itself.
	minReserve = 256
)

// connBound is the most connections to accept given the open-file limit
// (0: no bound, when the limit is unknown or beyond any need).
func connBound(fileLimit uint64) int {
	if fileLimit == 0 || fileLimit > 1<<30 { // unknown, or unlimited (RLIM_INFINITY) in effect
		return 0
	}
	bound := fileLimit * connShareNum / connShareDen
	if fileLimit-bound < minReserve {
		if fileLimit <= 2*minReserve {
			return int(fileLimit / 2)
		}
		bound = fileLimit - minReserve
	}
	return int(bound)
}

// openFileLimit is the process's soft RLIMIT_NOFILE (Go raises it to the
// hard limit at start), 0 when unknown.
func openFileLimit() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	return lim.Cur
}

// boundListener bounds ln's open connections at bound (ln itself when
// bound is 0): Accept waits for a connection to close once bound are
// open, as x/net's netutil.LimitListener does. It is written here
// because LimitListener's connections hide CloseWrite: net/http then
// cannot half-close a connection it refuses (a body over its bound,
// answered 413), and the client, still writing, gets a reset in place of
// the answer.
func boundListener(ln net.Listener, bound int) net.Listener {
	if bound <= 0 {
		return ln
	}
	return &boundedListener{Listener: ln, slots: make(chan struct{}, bound), done: make(chan struct{})}
}

// boundedListener is boundListener's listener: slots holds a token for
// each open connection.
type boundedListener struct {
	net.Listener
	slots     chan struct{}
	done      chan struct{} // closed by Close: ends an Accept waiting for a slot
	closeOnce sync.Once
}

// Accept waits for a free slot, then accepts.
func (l *boundedListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &boundedConn{Conn: c, free: func() { <-l.slots }}, nil
}

// Close closes the listener and ends an Accept waiting for a slot.
func (l *boundedListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

// boundedConn frees its slot on its first Close.
type boundedConn struct {
	net.Conn
	freeOnce sync.Once
	free     func()
}

// Close closes the connection and frees its slot once.
func (c *boundedConn) Close() error {
	err := c.Conn.Close()
	c.freeOnce.Do(c.free)
	return err
}

// CloseWrite half-closes the connection (see boundListener).
func (c *boundedConn) CloseWrite() error { return closeWrite(c.Conn) }

// closeWrite half-closes c when it can (a TCP or TLS connection, or one
// of the wrappers here around one).
func closeWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return fmt.Errorf("node: %T cannot half-close: %w", c, errors.ErrUnsupported)
}
