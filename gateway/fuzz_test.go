package gateway

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/awsjson"
)

// FuzzNativeAPI sends arbitrary bodies to the native endpoints: every answer
// is a decision or a 4xx with a message, never a panic or a 5xx.
func FuzzNativeAPI(f *testing.F) {
	f.Add(`{"service":"ecs","account":"1","region":"us-east-1","action":"ListClusters","tokens":3}`, false)
	f.Add(`{"service":"ecs","region":"us-east-1","requests":[{"account":"1","action":"ListClusters"}]}`, true)
	f.Add(`{"service":"cloudmap","account":"1","region":"r","category":"discover-instances","tokens":20001}`, false)
	g, err := New(Options{MaxBodyBytes: 4096})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string, batch bool) {
		path := "/v1/take"
		if batch {
			path = "/v1/take/batch"
		}
		w := httptest.NewRecorder()
		g.ServeHTTP(w, httptest.NewRequest("POST", path, strings.NewReader(body)))
		switch w.Code {
		case 200, 429:
		case 400, 413:
			if !strings.Contains(w.Body.String(), `"error":`) {
				t.Fatalf("%d without an error message: %s", w.Code, w.Body)
			}
		default:
			t.Fatalf("status %d for %q: %s", w.Code, body, w.Body)
		}
	})
}

// FuzzAWSRequest sends arbitrary X-Amz-Target, Authorization and bodies
// to the AWS path: every answer is 200 {} or a 4xx in the AWS error shape
// (a throttle included), never a 5xx, and no error quotes much of the input.
func FuzzAWSRequest(f *testing.F) {
	f.Add(ecsTarget+"ListClusters", sigv4("AKIDFUZZ", "us-east-1", "ecs"), `{}`, false)
	f.Add(ecsTarget+"ListClusters", sigv4("AKIDFUZZ", "us-east-1", "ecs"), `{"a":1,"a":2}`, true)
	f.Add("Route53AutoNaming_v20170314.DiscoverInstances", sigv4("AKIDFUZZ", "us-east-1", "servicediscovery"), `{"NamespaceName":"ns"}`, false)
	g, err := New(Options{MaxBodyBytes: 4096})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, target, auth, body string, twice bool) {
		r := httptest.NewRequest("POST", "/", strings.NewReader(body))
		r.Header.Set("Content-Type", awsjson.ContentType)
		r.Header["X-Amz-Target"] = []string{target}
		r.Header["Authorization"] = []string{auth}
		if twice {
			r.Header["Authorization"] = append(r.Header["Authorization"], auth)
		}
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		switch w.Code {
		case 200:
			if twice {
				t.Fatalf("two Authorization headers accepted")
			}
		case 400, 413:
			if w.Header().Get("X-Amzn-ErrorType") == "" || !strings.Contains(w.Body.String(), `"__type":`) {
				t.Fatalf("%d not in the AWS error shape: %s", w.Code, w.Body)
			}
			if w.Body.Len() > 1024 {
				t.Fatalf("a %d-byte error answer", w.Body.Len())
			}
		default:
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
	})
}
