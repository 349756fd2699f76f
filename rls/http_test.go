package rls

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// POST /json takes and answers envoy ratelimit's JSON (protojson), with
// 429 when over the limit and 400 for what does not parse; GET
// /healthcheck answers 200 "OK".
func TestHTTPJSONAndHealthcheck(t *testing.T) {
	ts := start(t, Options{Config: mustParse(t, `domain: d
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 1}
`)})
	srv := httptest.NewServer(ts.HTTPHandler())
	defer srv.Close()
	post := func(body string) (int, string) {
		t.Helper()
		resp, err := http.Post(srv.URL+"/json", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	req := `{"domain": "d", "descriptors": [{"entries": [{"key": "k", "value": "v"}]}]}`
	code, body := post(req)
	if code != 200 || !strings.Contains(body, `"overallCode":"OK"`) || !strings.Contains(body, `"requestsPerUnit":1`) {
		t.Errorf("first: %d %s", code, body)
	}
	if code, body := post(req); code != 429 || !strings.Contains(body, `"overallCode":"OVER_LIMIT"`) {
		t.Errorf("second: %d %s", code, body)
	}
	if code, body := post(`{"domain": 5}`); code != 400 || !strings.Contains(body, "not a RateLimitRequest") {
		t.Errorf("bad JSON: %d %s", code, body)
	}
	if code, body := post(`{"domain": "d"}`); code != 400 || !strings.Contains(body, "descriptor list must not be empty") {
		t.Errorf("no descriptors: %d %s", code, body)
	}
	if code, _ := post(`{"domain": "` + strings.Repeat("x", MaxMessageBytes) + `"}`); code != 413 {
		t.Errorf("2 MiB body: %d", code)
	}
	resp, err := http.Get(srv.URL + "/healthcheck")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "OK" {
		t.Errorf("healthcheck: %d %q", resp.StatusCode, b)
	}
	// envoy ratelimit's /json takes any method: a GET has no body, so 400.
	if resp, err := http.Get(srv.URL + "/json"); err != nil || resp.StatusCode != 400 {
		t.Errorf("GET /json: %v %v, want 400 as envoy ratelimit answers", resp, err)
	} else {
		resp.Body.Close()
	}
}

func FuzzJSON(f *testing.F) {
	f.Add(`{"domain": "d", "descriptors": [{"entries": [{"key": "k", "value": "v"}]}]}`)
	f.Add(`{"domain": "d", "descriptors": [{"entries": []}, {"entries": [{"key": ""}]}], "hitsAddend": 4}`)
	f.Add(`{"domain": "d", "descriptors": [{"entries": [{"key": "k"}], "limit": {"requestsPerUnit": 3, "unit": "HOUR"}}]}`)
	s := New(Options{Config: mustParse(f, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n")})
	h := s.HTTPHandler()
	f.Fuzz(func(t *testing.T, body string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("POST", "/json", strings.NewReader(body)))
		if c := w.Code; c != 200 && c != 429 && c != 400 && c != 413 {
			t.Fatalf("status %d: %s", c, w.Body)
		}
	})
}
