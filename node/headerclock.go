package node

import (
	"net"
	"sync"
	"time"
)

// net/http times the headers of a connection's first request from the
// accept (readHeaderTimeout), and those of each later one from its first
// byte. A client that opens a connection ahead of its request (Go's
// transport and the AWS SDKs do when requests outnumber idle
// connections, and keep the spare for 90 s) then has it closed after
// readHeaderTimeout unused, and a request it writes as the close crosses
// is lost: "connection reset by peer" on a POST, which no client
// retries on its own. headerClockListener gives every request the clock
// of a keep-alive connection's next one: idle until its first byte (for
// at most idleTimeout), then readHeaderTimeout for its headers.

// headerClockListener wraps the connections ln accepts (see above).
type headerClockListener struct {
	net.Listener
	idle, header time.Duration
}

// Accept accepts a connection and starts its idle clock.
func (l headerClockListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if err := c.SetReadDeadline(time.Now().Add(l.idle)); err != nil {
		c.Close()
		return nil, err
	}
	return &headerClockConn{Conn: c, header: l.header}, nil
}

// headerClockConn keeps its idle read deadline until its first byte
// arrives, whatever deadline the server sets before that, and then gives
// the headers their time from that byte; from there on the server's
// deadlines apply as set.
type headerClockConn struct {
	net.Conn
	header time.Duration

	mu      sync.Mutex
	started bool // a byte has arrived
}

// Read reads, and starts the header clock at the first byte.
func (c *headerClockConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		if !c.started {
			c.started = true
			_ = c.Conn.SetReadDeadline(time.Now().Add(c.header))
		}
		c.mu.Unlock()
	}
	return n, err
}

// SetReadDeadline sets the read deadline once the first byte has
// arrived; before that the idle one stays.
func (c *headerClockConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.started {
		return nil
	}
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline is SetReadDeadline and SetWriteDeadline.
func (c *headerClockConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetWriteDeadline(t)
}

// CloseWrite half-closes the connection, so that net/http can let a
// refused client read its answer before the connection closes.
func (c *headerClockConn) CloseWrite() error { return closeWrite(c.Conn) }
