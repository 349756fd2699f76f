// Package proxybuf lends httputil.ReverseProxy its body-copy buffers:
// without a BufferPool the proxy allocates a 32 KiB buffer per request.
// The gateway's upstream proxies and the pool's instance proxies share
// it.
package proxybuf

import (
	"net/http/httputil"
	"sync"
)

// Size is the length of each buffer: httputil.ReverseProxy's own.
const Size = 32 << 10

// Buffers is the shared pool; set it as a ReverseProxy's BufferPool.
var Buffers httputil.BufferPool = &buffers{}

type buffers struct{ p sync.Pool }

// Get returns a buffer of Size bytes.
func (b *buffers) Get() []byte {
	if buf, ok := b.p.Get().(*[]byte); ok {
		return *buf
	}
	return make([]byte, Size)
}

// Put returns buf to the pool.
func (b *buffers) Put(buf []byte) { b.p.Put(&buf) }
