// Package ctgen writes CloudTrail logs of a known shape, for tests,
// benchmarks and examples of package replay: tenants calling an API at a
// steady rate or in bursts, each record padded with the members a real
// CloudTrail record has (about 1 KB).
package ctgen

import (
	"bufio"
	"fmt"
	"io"
	"time"
)

// Tenant is one caller's traffic. Each second of the log it makes Rate
// calls; every Every (from the log's start) it also makes Burst calls in
// that second. All calls of a second carry that second's eventTime, as
// CloudTrail records times to the second.
type Tenant struct {
	// Account is userIdentity.accountId; AccessKey its accessKeyId.
	Account, AccessKey string
	// Source is eventSource, "ecs.amazonaws.com" when empty.
	Source string
	// Region is awsRegion, "us-east-1" when empty.
	Region string
	// Action is eventName.
	Action string
	// Rate is the calls made each second.
	Rate int
	// Burst calls are made in the first second of every Every.
	Burst int
	// Every is the period of the bursts; 0 means one burst, at the start.
	Every time.Duration
	// ErrorCode, when set, is the errorCode of every call.
	ErrorCode string
}

// Spec is the shape of one log.
type Spec struct {
	// Start is the time of the first second.
	Start time.Time
	// Duration is the time covered, in whole seconds.
	Duration time.Duration
	// Tenants are the callers; their records of one second are written
	// tenant by tenant.
	Tenants []Tenant
	// Lines writes one record a line (as CloudTrail Lake and Athena
	// export) instead of a {"Records":[…]} file.
	Lines bool
}

// Calls returns how many calls t makes in second s of a log.
func (t Tenant) Calls(s int) int {
	n := t.Rate
	if t.Burst > 0 {
		every := int(t.Every / time.Second)
		if (every <= 0 && s == 0) || (every > 0 && s%every == 0) {
			n += t.Burst
		}
	}
	return n
}

// Write writes the log s describes to w.
func Write(w io.Writer, s Spec) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	if !s.Lines {
		bw.WriteString(`{"Records":[`)
	}
	n := 0
	for sec := range int(s.Duration / time.Second) {
		ts := s.Start.UTC().Add(time.Duration(sec) * time.Second).Format("2006-01-02T15:04:05Z")
		for ti, t := range s.Tenants {
			src, region := t.Source, t.Region
			if src == "" {
				src = "ecs.amazonaws.com"
			}
			if region == "" {
				region = "us-east-1"
			}
			errPart := ""
			if t.ErrorCode != "" {
				errPart = fmt.Sprintf(`"errorCode":%q,"errorMessage":"Rate exceeded",`, t.ErrorCode)
			}
			for range t.Calls(sec) {
				if n > 0 && !s.Lines {
					bw.WriteByte(',')
				}
				n++
				fmt.Fprintf(bw, `{"eventVersion":"1.08","userIdentity":{"type":"AssumedRole","principalId":"AROAEXAMPLE:session-%d","arn":"arn:aws:sts::%s:assumed-role/deployer/session-%d","accountId":%q,"accessKeyId":%q,"sessionContext":{"sessionIssuer":{"type":"Role","principalId":"AROAEXAMPLE","arn":"arn:aws:iam::%s:role/deployer","accountId":%q,"userName":"deployer"},"attributes":{"creationDate":%q,"mfaAuthenticated":"false"}}},"eventTime":%q,"eventSource":%q,"eventName":%q,"awsRegion":%q,"sourceIPAddress":"203.0.113.%d","userAgent":"aws-sdk-go-v2/1.30.0 os/linux lang/go#1.23 api/ecs#1.45.0",%s"requestParameters":{"clusters":["prod-%d"],"include":["TAGS"]},"responseElements":null,"requestID":"%08x-0000-4000-8000-%012x","eventID":"%08x-1111-4000-8000-%012x","readOnly":true,"eventType":"AwsApiCall","managementEvent":true,"recipientAccountId":%q,"eventCategory":"Management","tlsDetails":{"tlsVersion":"TLSv1.3","cipherSuite":"TLS_AES_128_GCM_SHA256","clientProvidedHostHeader":"ecs.%s.amazonaws.com"}}`,
					ti, t.Account, ti, t.Account, t.AccessKey, t.Account, t.Account, ts, ts, src, t.Action, region, ti%250+1, errPart, ti, n, n, n, n, t.Account, region)
				if s.Lines {
					bw.WriteByte('\n')
				}
			}
		}
	}
	if !s.Lines {
		bw.WriteString("]}\n")
	}
	return bw.Flush()
}
