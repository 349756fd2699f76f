package proxybuf_test

import (
	"fmt"
	"net/http/httputil"
	"net/url"

	"github.com/tollgate/tollgate/internal/proxybuf"
)

func Example() {
	u, _ := url.Parse("http://127.0.0.1:8080")
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.BufferPool = proxybuf.Buffers // no 32 KiB allocation per proxied request
	fmt.Println(len(rp.BufferPool.Get()))
	// Output: 32768
}
