package proxybuf_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/proxybuf"
)

// A buffer is lent at its full size, and a proxy using the pool copies a
// body longer than several buffers whole.
func TestBuffersAreFullSizeAndCopyWholeBodies(t *testing.T) {
	b := proxybuf.Buffers.Get()
	if len(b) != proxybuf.Size {
		t.Fatalf("buffer of %d bytes, want %d", len(b), proxybuf.Size)
	}
	proxybuf.Buffers.Put(b)

	body := strings.Repeat("0123456789abcdef", 3*proxybuf.Size/16+7)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, body)
	}))
	defer upstream.Close()
	u, _ := url.Parse(upstream.URL)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.BufferPool = proxybuf.Buffers
	front := httptest.NewServer(rp)
	defer front.Close()
	resp, err := http.Get(front.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if string(got) != body {
		t.Fatalf("proxied %d bytes, want the %d sent", len(got), len(body))
	}
}
