package quota

import "testing"

func TestRouteHostMatch(t *testing.T) {
	r := &Route{Host: "hello.example"}
	if p, ok := r.Match("Hello.Example:8080", "/x"); !ok || p != "/x" {
		t.Fatalf("host match: %q %v", p, ok)
	}
	if _, ok := r.Match("other.example", "/x"); ok {
		t.Fatal("other host matched")
	}
	if p, ok := r.Match("canary---hello.example:8080", "/x"); !ok || p != "/x" {
		t.Fatalf("tagged host: %q %v", p, ok)
	}
	for _, h := range []string{"---hello.example", "canary---other.example", "canary--hello.example"} {
		if _, ok := r.Match(h, "/x"); ok {
			t.Fatalf("%s matched hello.example", h)
		}
	}
}
