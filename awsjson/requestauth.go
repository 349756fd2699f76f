package awsjson

// This file reads what a request says of its SigV4 signature.

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// requestAuth is what a request says of its signature, in its
// Authorization header or its presigned query.
type requestAuth struct {
	cred          Credential
	signedHeaders string // lower case, sorted, joined by ';'
	signature     string
	date          string        // X-Amz-Date, yyyymmddThhmmssZ
	signed        time.Time     // date
	token         string        // X-Amz-Security-Token
	expires       time.Duration // a presigned URL's X-Amz-Expires; 0 for a header
	presigned     bool
}

// parseRequestAuth reads a request's SigV4 parameters: the Authorization
// header, or else the X-Amz-* query parameters of a presigned URL.
func parseRequestAuth(r *http.Request) (requestAuth, error) {
	var a requestAuth
	if h := first(r.Header["Authorization"]); h != "" || r.URL.RawQuery == "" {
		p, err := parseAuthorization(h)
		if err != nil {
			return a, err
		}
		a.cred, a.signature, a.date, a.token = p.cred, p.signature, first(r.Header[headerAmzDate]), first(r.Header[headerToken])
		a.signedHeaders = p.signedHeaders
		if a.date == "" {
			return a, wrapBadAuth("Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.")
		}
	} else {
		q := r.URL.Query()
		if q.Get("X-Amz-Algorithm") == "" && q.Get(querySignature) == "" {
			return a, ErrMissingAuth
		}
		if alg := q.Get("X-Amz-Algorithm"); alg != sigv4Algorithm {
			return a, wrapBadAuth("X-Amz-Algorithm must be " + sigv4Algorithm)
		}
		cred, err := parseCredential(q.Get("X-Amz-Credential"))
		if err != nil {
			return a, err
		}
		a.cred, a.signature, a.date, a.token, a.presigned = cred, q.Get(querySignature), q.Get(headerAmzDate), q.Get(headerToken), true
		a.signedHeaders = q.Get("X-Amz-SignedHeaders")
		n, err := strconv.Atoi(q.Get("X-Amz-Expires"))
		if err != nil || n <= 0 || time.Duration(n)*time.Second > maxPresignExpiry {
			return a, wrapBadAuth("X-Amz-Expires must be a number of seconds from 1 to 604800")
		}
		a.expires = time.Duration(n) * time.Second
		if a.signature == "" || a.date == "" || a.signedHeaders == "" {
			return a, wrapBadAuth("a presigned URL needs X-Amz-Signature, X-Amz-Date and X-Amz-SignedHeaders")
		}
	}
	var ok bool
	if a.signed, ok = parseAmzDate(a.date); !ok {
		return a, wrapBadAuth("X-Amz-Date " + Clip(a.date) + " is not yyyymmddThhmmssZ")
	}
	if err := checkSignedHeaders(a.signedHeaders); err != nil {
		return a, err
	}
	if len(a.signature) != 64 {
		return a, wrapBadAuth("Signature is not 64 hexadecimal digits")
	}
	return a, nil
}

// first is a header's first value, as http.Header.Get gives it.
func first(values []string) string {
	if len(values) == 0 {
		return ""
	}
	return values[0]
}

// maxSignedHeaders bounds the headers a signature may list.
const maxSignedHeaders = 64

// checkSignedHeaders checks a SignedHeaders list: lower-case header
// names, sorted, each once, host among them, as every signer writes it.
func checkSignedHeaders(list string) error {
	n, host, prev := 0, false, ""
	for name := range strings.SplitSeq(list, ";") {
		if n++; n > maxSignedHeaders {
			return wrapBadAuth("more than 64 signed headers")
		}
		if !isHeaderName(name) || name <= prev {
			return wrapBadAuth("SignedHeaders " + Clip(list) + " is not lower-case header names, sorted, joined by ';'")
		}
		host = host || name == "host"
		prev = name
	}
	if !host {
		return wrapBadAuth("'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization.")
	}
	return nil
}

// isHeaderName reports whether s is a lower-case HTTP header name (an RFC
// 9110 token without upper-case letters).
func isHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !headerNameByte[s[i]] {
			return false
		}
	}
	return true
}

// headerNameByte: the bytes of a lower-case RFC 9110 token.
var headerNameByte = func() (t [256]bool) {
	for c := '!'; c <= '~'; c++ {
		t[c] = !('A' <= c && c <= 'Z') && !strings.ContainsRune("\"(),/:;<=>?@[\\]{}", c)
	}
	return t
}()

// parseAmzDate reads an X-Amz-Date, yyyymmddThhmmssZ, as time.Parse with
// amzDateFormat would, without its general machinery.
func parseAmzDate(s string) (time.Time, bool) {
	if len(s) != len(amzDateFormat) || s[8] != 'T' || s[15] != 'Z' || !isDigits(s[:8]) || !isDigits(s[9:15]) {
		return time.Time{}, false
	}
	n := func(i, j int) int {
		v := 0
		for _, c := range []byte(s[i:j]) {
			v = 10*v + int(c-'0')
		}
		return v
	}
	year, month, day, hour, minute, sec := n(0, 4), n(4, 6), n(6, 8), n(9, 11), n(11, 13), n(13, 15)
	t := time.Date(year, time.Month(month), day, hour, minute, sec, 0, time.UTC)
	if month < 1 || month > 12 || t.Day() != day || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false // as time.Parse: out of range
	}
	return t, true
}
