package forward_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"

	"github.com/tollgate/tollgate/pool/forward"
)

// backend is an instance at a fixed address that never exits under a
// request.
type backend struct{ url *url.URL }

func (b backend) Name() string             { return "hello-00001-1" }
func (b backend) URL() *url.URL            { return b.url }
func (b backend) AwaitExit() (bool, error) { return false, nil }

// A proxy in front of one instance: the client's Host reaches it as sent,
// with X-Forwarded-Host set.
func Example() {
	inst := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s for %s\n", r.Method, r.URL.Path, r.Header.Get("X-Forwarded-Host"))
	}))
	defer inst.Close()
	u, _ := url.Parse(inst.URL)

	p := forward.New(forward.Options{Service: "hello", MaxConcurrency: 10})
	defer p.CloseIdleConnections()
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.Serve(w, r, backend{u}, context.Background())
	}))
	defer front.Close()

	req, _ := http.NewRequest(http.MethodGet, front.URL+"/greeting", nil)
	req.Host = "hello.example.com"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Print(resp.StatusCode, " ", string(body))
	// Output: 200 GET /greeting for hello.example.com
}
