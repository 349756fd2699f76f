package awsjson

import (
	"errors"
	"strings"
	"testing"
	"time"
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
			if len(err.Error()) > 4*MaxEcho+100 {
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
			if len(err.Error()) > 4*MaxEcho+100 {
				t.Fatalf("a %d-byte error quotes too much of the header", len(err.Error()))
			}
			return
		}
		if prefix+"."+action != header || !isWord(prefix, 128) || !isWord(action, 128) {
			t.Fatalf("ParseTarget(%q) = %q, %q", header, prefix, action)
		}
	})
}

// FuzzParseAmzDate: parseAmzDate reads exactly what time.Parse reads with
// the X-Amz-Date layout, as the same instant.
func FuzzParseAmzDate(f *testing.F) {
	for _, s := range []string{"20261205T031500Z", "20260230T000000Z", "20261205T240000Z", "2026120XT031500Z", "20261205T031500", "00000101T000000Z", "20241229T235960Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseAmzDate(s)
		want, err := time.Parse(amzDateFormat, s)
		if ok != (err == nil) || ok && !got.Equal(want) {
			t.Fatalf("parseAmzDate(%q) = %v, %v; time.Parse: %v, %v", s, got, ok, want, err)
		}
	})
}
