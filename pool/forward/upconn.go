package forward

import (
	"bufio"
	"context"
	"errors"
	"math"
	"net"
	"sync"
	"time"
)

// Limits of the forwarder's connections to instances, as
// http.DefaultTransport keeps them.
const (
	// upIdleTimeout closes a connection idle for longer than this.
	upIdleTimeout = 90 * time.Second
	// upDialTimeout bounds a connect (the request's own deadline too).
	upDialTimeout = 30 * time.Second
	// upKeepAlive is the TCP keep-alive period of a connection.
	upKeepAlive = 30 * time.Second
	// maxResponseHeadBytes bounds a response's head (its status line and
	// headers, and each informational response's), as
	// http.Transport.MaxResponseHeaderBytes does by default.
	maxResponseHeadBytes = 10 << 20
	// upBufferSize is the size of each connection's read and write
	// buffers: a request head and a small answer fit in one.
	upBufferSize = 4 << 10
)

// errResponseHeadTooLarge ends a response whose head passes
// maxResponseHeadBytes.
var errResponseHeadTooLarge = errors.New("the instance's response head is larger than 10 MiB")

// aLongTimeAgo is a deadline in the past: setting it interrupts a
// connection's blocked read or write at once.
var aLongTimeAgo = time.Unix(1, 0)

// upConn is one kept-alive HTTP/1.1 connection to an instance, used by one
// request at a time.
type upConn struct {
	nc        net.Conn
	budget    budgetReader // between nc and br: bounds a response head
	br        *bufio.Reader
	bw        *bufio.Writer
	interrupt func() // sets a deadline in the past: the request's context ended
	idleSince time.Time
}

func newUpConn(nc net.Conn) *upConn {
	c := &upConn{nc: nc}
	c.budget = budgetReader{r: nc, left: math.MaxInt64}
	c.br = bufio.NewReaderSize(&c.budget, upBufferSize)
	c.bw = bufio.NewWriterSize(nc, upBufferSize)
	c.interrupt = func() { _ = nc.SetDeadline(aLongTimeAgo) }
	return c
}

// budgetReader reads from r until left bytes have been read, then fails
// with errResponseHeadTooLarge: the forwarder sets left while it reads a
// response head and lifts it for the body.
type budgetReader struct {
	r    net.Conn
	left int64
}

func (b *budgetReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errResponseHeadTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// upConns keeps each instance's idle connections, most recently used
// last, at most maxIdle per instance; a connection idle for longer than
// upIdleTimeout is closed when next seen.
type upConns struct {
	maxIdle int
	dialer  net.Dialer

	mu   sync.Mutex
	idle map[string][]*upConn // by the instance's host:port
}

func newUpConns(maxIdle int) *upConns {
	return &upConns{
		maxIdle: maxIdle,
		dialer:  net.Dialer{Timeout: upDialTimeout, KeepAlive: upKeepAlive},
		idle:    map[string][]*upConn{},
	}
}

// get returns an idle connection to host, or dials one; reused says which.
func (p *upConns) get(ctx context.Context, host string, now time.Time) (c *upConn, reused bool, err error) {
	p.mu.Lock()
	list := p.idle[host]
	if n := len(list); n > 0 {
		c = list[n-1]
		list[n-1] = nil
		list = list[:n-1]
		if now.Sub(c.idleSince) > upIdleTimeout {
			// It and every one below it idled too long.
			for i, old := range list {
				old.nc.Close()
				list[i] = nil
			}
			list = list[:0]
			c.nc.Close()
			c = nil
		}
		p.idle[host] = list
	}
	p.mu.Unlock()
	if c != nil {
		return c, true, nil
	}
	nc, err := p.dialer.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, false, err
	}
	return newUpConn(nc), false, nil
}

// put keeps c for the next request to host, or closes it when host
// already has maxIdle idle connections.
func (p *upConns) put(host string, c *upConn, now time.Time) {
	c.idleSince = now
	p.mu.Lock()
	list := p.idle[host]
	if len(list) >= p.maxIdle {
		p.mu.Unlock()
		c.nc.Close()
		return
	}
	p.idle[host] = append(list, c)
	p.mu.Unlock()
}

// drop closes host's idle connections: one was found closed by the
// instance (it restarted, or timed them out), so the others likely are.
func (p *upConns) drop(host string) {
	p.mu.Lock()
	list := p.idle[host]
	delete(p.idle, host)
	p.mu.Unlock()
	for _, c := range list {
		c.nc.Close()
	}
}

// closeIdle closes every idle connection.
func (p *upConns) closeIdle() {
	p.mu.Lock()
	all := p.idle
	p.idle = map[string][]*upConn{}
	p.mu.Unlock()
	for _, list := range all {
		for _, c := range list {
			c.nc.Close()
		}
	}
}

// idleCount is how many idle connections host has.
func (p *upConns) idleCount(host string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle[host])
}
