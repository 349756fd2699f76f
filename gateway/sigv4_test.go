package gateway

import (
	stdjson "encoding/json"
	"errors"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
)

func TestParseAuthorization(t *testing.T) {
	good := "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/ecs/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
	c, err := ParseAuthorization(good)
	if err != nil {
		t.Fatal(err)
	}
	if c != (Credential{AccessKeyID: "AKIDEXAMPLE", Date: "20150830", Region: "us-east-1", Service: "ecs"}) {
		t.Fatalf("credential = %+v", c)
	}
	// Parameter order and spacing vary between SDKs.
	if c2, err := ParseAuthorization("AWS4-HMAC-SHA256 Signature=ab,SignedHeaders=host,Credential=AKIDEXAMPLE/20150830/us-east-1/ecs/aws4_request"); err != nil || c2 != c {
		t.Fatalf("reordered: %+v %v", c2, err)
	}
	for _, tc := range []struct {
		header string
		want   error
	}{
		{"", ErrMissingAuth},
		{"Basic dXNlcjpwYXNz", ErrBadAuth},
		{"AWS4-HMAC-SHA256", ErrBadAuth},
		{"AWS4-HMAC-SHA256 Credential=AKID/20150830/us-east-1/ecs/aws4_request", ErrBadAuth},                                         // no SignedHeaders, Signature
		{"AWS4-HMAC-SHA256 Credential=AKID/20150830/us-east-1/ecs, SignedHeaders=host, Signature=ab", ErrBadAuth},                    // short scope
		{"AWS4-HMAC-SHA256 Credential=AKID/20150830/us-east-1/ecs/aws5_request, SignedHeaders=host, Signature=ab", ErrBadAuth},       // terminator
		{"AWS4-HMAC-SHA256 Credential=AKID/2015-08-30/us-east-1/ecs/aws4_request, SignedHeaders=host, Signature=ab", ErrBadAuth},     // date
		{"AWS4-HMAC-SHA256 Credential=AKID/20150830/US_EAST_1/ecs/aws4_request, SignedHeaders=host, Signature=ab", ErrBadAuth},       // region
		{"AWS4-HMAC-SHA256 Credential=AK{ID}/20150830/us-east-1/ecs/aws4_request, SignedHeaders=host, Signature=ab", ErrBadAuth},     // key id
		{"AWS4-HMAC-SHA256 Credential=/20150830/us-east-1/ecs/aws4_request, SignedHeaders=host, Signature=ab", ErrBadAuth},           // empty key id
		{"AWS4-HMAC-SHA256 Credential=AKID/20150830//ecs/aws4_request, SignedHeaders=host, Signature=ab", ErrBadAuth},                // empty region
		{"AWS4-HMAC-SHA256 Credential=AKID/20150830/us-east-1/ecs/aws4_request, SignedHeaders=host, Signature", ErrBadAuth},          // not name=value
		{"AWS4-HMAC-SHA256 Credential=AKID/20150830/us-east-1/ecs/aws4_request/x, SignedHeaders=host, Signature=ab", ErrBadAuth},     // long scope
		{"AWS4-ECDSA-P256-SHA256 Credential=AKID/20150830/us-east-1/ecs/aws4_request, SignedHeaders=host, Signature=ab", ErrBadAuth}, // SigV4A
		// Parser differentials: two identities in one header.
		{"AWS4-HMAC-SHA256 Credential=A/20150830/us-east-1/ecs/aws4_request, Credential=B/20150830/us-east-1/ecs/aws4_request, SignedHeaders=host, Signature=ab", ErrBadAuth},
		{"AWS4-HMAC-SHA256 Credential=A/20150830/us-east-1/ecs/aws4_request, SignedHeaders=host, Signature=ab, Signature=cd", ErrBadAuth},
		{"AWS4-HMAC-SHA256 Credential=A/20150830/us-east-1/ecs/aws4_request, Credential =B/20150830/us-east-1/ecs/aws4_request, SignedHeaders=host, Signature=ab", ErrBadAuth},
		{"AWS4-HMAC-SHA256 Credential=A/20150830/us-east-1/ecs/aws4_request, SignedHeaders=host, Signature=ab, AWS4-HMAC-SHA256 Credential=B/20150830/us-east-1/ecs/aws4_request, SignedHeaders=host, Signature=ab", ErrBadAuth}, // two headers joined
	} {
		if _, err := ParseAuthorization(tc.header); !errors.Is(err, tc.want) {
			t.Errorf("ParseAuthorization(%q) error = %v, want %v", tc.header, err, tc.want)
		}
	}
}

func TestParseTarget(t *testing.T) {
	prefix, action, err := ParseTarget("AmazonEC2ContainerServiceV20141113.DescribeClusters")
	if err != nil || prefix != "AmazonEC2ContainerServiceV20141113" || action != "DescribeClusters" {
		t.Fatalf("ParseTarget = %q %q %v", prefix, action, err)
	}
	if p, a, err := ParseTarget("Route53AutoNaming_v20170314.DiscoverInstances"); err != nil || p != "Route53AutoNaming_v20170314" || a != "DiscoverInstances" {
		t.Fatalf("Cloud Map target = %q %q %v", p, a, err)
	}
	for _, h := range []string{"", "DescribeClusters", ".DescribeClusters", "AmazonECS.", "Amazon ECS.List", "A.B-C", "A.B.", strings.Repeat("x", 200) + ".Y"} {
		if _, _, err := ParseTarget(h); !errors.Is(err, ErrBadTarget) {
			t.Errorf("ParseTarget(%q) error = %v, want ErrBadTarget", h, err)
		}
	}
}

func FuzzParseAuthorization(f *testing.F) {
	f.Add("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/ecs/aws4_request, SignedHeaders=host;x-amz-date, Signature=abc")
	f.Add("AWS4-HMAC-SHA256 Credential=a/b/c/d/e,SignedHeaders=,Signature=")
	f.Add("AWS4-HMAC-SHA256 ,,,")
	f.Add("")
	f.Add("AWS4-HMAC-SHA256 Credential=A/20150830/us-east-1/ecs/aws4_request, Credential =B/20150830/us-east-1/ecs/aws4_request, SignedHeaders=host, Signature=ab")
	f.Add("AWS4-HMAC-SHA256 Credential=" + strings.Repeat("A", 300) + "/20150830/us-east-1/ecs/aws4_request, SignedHeaders=host, Signature=ab")
	f.Fuzz(func(t *testing.T, header string) {
		c, err := ParseAuthorization(header)
		if err != nil {
			if !errors.Is(err, ErrBadAuth) && !errors.Is(err, ErrMissingAuth) {
				t.Fatalf("error %v wraps neither ErrBadAuth nor ErrMissingAuth", err)
			}
			if len(err.Error()) > 4*maxEcho+100 {
				t.Fatalf("a %d-byte error quotes too much of the header: %.200s", len(err.Error()), err)
			}
			return
		}
		// One identity only: an accepted header names each parameter once.
		_, params, _ := strings.Cut(header, " ")
		creds := 0
		for p := range strings.SplitSeq(params, ",") {
			if name, _, _ := strings.Cut(strings.TrimSpace(p), "="); strings.TrimSpace(name) == "Credential" {
				creds++
			}
		}
		if creds != 1 {
			t.Fatalf("accepted %q with %d Credential parameters", header, creds)
		}
		// What is accepted is safe to put in a bucket key.
		if !isWord(c.AccessKeyID, 128) || !isLowerName(c.Region) || !isLowerName(c.Service) || len(c.Date) != 8 {
			t.Fatalf("accepted a credential that is not clean: %+v", c)
		}
		if !strings.Contains(header, c.AccessKeyID+"/"+c.Date+"/"+c.Region+"/"+c.Service+"/aws4_request") {
			t.Fatalf("credential %+v is not in the header %q", c, header)
		}
	})
}

func FuzzParseTarget(f *testing.F) {
	f.Add("AmazonEC2ContainerServiceV20141113.DescribeClusters")
	f.Add("a.b.c")
	f.Add(".")
	f.Add(strings.Repeat("x", 300) + ".Y")
	f.Fuzz(func(t *testing.T, header string) {
		prefix, action, err := ParseTarget(header)
		if err != nil {
			if !errors.Is(err, ErrBadTarget) {
				t.Fatalf("error %v does not wrap ErrBadTarget", err)
			}
			if len(err.Error()) > 4*maxEcho+100 {
				t.Fatalf("a %d-byte error quotes too much of the header", len(err.Error()))
			}
			return
		}
		if prefix+"."+action != header || !isWord(prefix, 128) || !isWord(action, 128) {
			t.Fatalf("ParseTarget(%q) = %q, %q", header, prefix, action)
		}
	})
}

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

// FuzzAWSBody checks the AWS path's body check: what it accepts, every
// JSON parser reads one way (encoding/json, which lets the last duplicate
// win and replaces invalid UTF-8, agrees with the strict json v2), and its
// messages quote little of the body.
func FuzzAWSBody(f *testing.F) {
	for _, s := range []string{`{}`, `{"clusters":["a"]}`, `{"a":1,"a":2}`, "{\"a\":\"\xff\"}", `{"a":"\ud800"}`, `[]`, `{} {}`, ` {"a":{"b":[1,2,{"c":null}]}} `, ``, `{"\u0061":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		msg := checkAWSBody(body)
		if msg != "" {
			if len(msg) > 4*maxEcho+100 {
				t.Fatalf("a %d-byte message for a %d-byte body", len(msg), len(body))
			}
			return
		}
		if len(body) == 0 {
			return
		}
		var strict map[string]any
		if err := jsonv2.Unmarshal(body, &strict); err != nil {
			t.Fatalf("accepted %q, which json v2 rejects: %v", body, err)
		}
		var lax map[string]any
		if err := stdjson.Unmarshal(body, &lax); err != nil {
			t.Fatalf("accepted %q, which encoding/json rejects: %v", body, err)
		}
		if !reflect.DeepEqual(strict, lax) {
			t.Fatalf("accepted %q, which two parsers read differently: %v and %v", body, strict, lax)
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
		r.Header.Set("Content-Type", contentTypeAWSJSON)
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
