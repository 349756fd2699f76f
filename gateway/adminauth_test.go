package gateway

import (
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/tollgate/tollgate/awsjson"
)

// TestWrongAdminTokensAreBoundedPerAddress: 2,000 wrong tokens from one
// address: the first 10 are compared (401), the rest refused uncompared
// (429 with Retry-After); the right token from another address still
// works; an address that sends none is never held.
func TestWrongAdminTokensAreBoundedPerAddress(t *testing.T) {
	d := newDoor(t, Options{AdminToken: "the-admin-token"}, awsjson.FailureOptions{})
	try := func(c *http.Client, token string) (int, string) {
		r, _ := http.NewRequest(http.MethodGet, d.url+"/v1/admin/", nil)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	guesser := clientFrom("127.0.0.1")
	counts := map[int]int{}
	for i := range 2000 {
		status, retry := try(guesser, fmt.Sprintf("guess-%d", i))
		counts[status]++
		if status == http.StatusTooManyRequests && retry == "" {
			t.Fatal("429 without Retry-After")
		}
	}
	if counts[http.StatusUnauthorized] != DefaultAdminFailureBurst || counts[http.StatusTooManyRequests] != 2000-DefaultAdminFailureBurst {
		t.Errorf("2,000 wrong tokens: %v, want %d compared (401) and the rest 429", counts, DefaultAdminFailureBurst)
	}
	if status, _ := try(clientFrom("127.0.0.2"), "the-admin-token"); status != http.StatusOK {
		t.Errorf("the right token from another address: %d", status)
	}
	for range 50 {
		if status, _ := try(clientFrom("127.0.0.3"), ""); status != http.StatusUnauthorized {
			t.Fatalf("no token at all: %d, want 401 every time (it is not a guess)", status)
		}
	}
}
