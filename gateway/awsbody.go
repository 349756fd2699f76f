package gateway

// awsBodyBound is the largest body a built-in AWS API's requests can
// have, fitted to its largest real request, so that a client of that API
// can hold no more than such a request while it is read.
//
// Sizes assume the worst encoding a real SDK sends: botocore (the AWS CLI,
// boto3) writes JSON with ensure_ascii, so every non-ASCII character of a
// string is a 6-byte \uXXXX escape; the Go and Java SDKs write UTF-8 (at
// most 3 bytes for such a character). Tags, where an action takes them,
// are at their model's most: a key of 128 and a value of 256 characters.
type awsBodyBound struct {
	all    int64           // every action but…
	tagged map[string]bool // …these, which take a list of tags
	tags   int64           // their bound
}

const (
	// ecsBodyBound: the largest ECS request is RegisterTaskDefinition: a
	// task definition of at most 64 KiB (ECS's "task definition size"
	// quota) written with escapes, and its 50 tags (50 × 384 characters
	// × 6 bytes = 113 KiB): 497 KiB. RunTask's overrides are at most
	// 8,192 characters.
	ecsBodyBound = 512 << 10
	// taggedBodyBound: Cloud Map and Service Quotas take up to 200 tags
	// in one call (their models' list bound): 200 × 384 × 6 = 450 KiB,
	// plus the names and an ARN.
	taggedBodyBound = 512 << 10
	// smallBodyBound: every other Cloud Map and Service Quotas request.
	// The largest is Cloud Map's RegisterInstance (attributes of at most
	// 5,000 characters in all, up to 30 KB escaped, and its ids) or
	// DiscoverInstances' query parameters (the same attributes).
	smallBodyBound = 64 << 10
)

// awsBodyBounds are the bounds by X-Amz-Target prefix; a service of the
// config's own (not a built-in) has only Options.MaxBodyBytes.
var awsBodyBounds = map[string]awsBodyBound{
	"AmazonEC2ContainerServiceV20141113": {all: ecsBodyBound},
	"Route53AutoNaming_v20170314": {all: smallBodyBound, tags: taggedBodyBound, tagged: map[string]bool{
		"TagResource": true, "CreateHttpNamespace": true, "CreatePrivateDnsNamespace": true,
		"CreatePublicDnsNamespace": true, "CreateService": true,
	}},
	"ServiceQuotasV20190624": {all: smallBodyBound, tags: taggedBodyBound, tagged: map[string]bool{
		"TagResource": true,
	}},
}

// awsBodyLimit is the largest body accepted for an AWS JSON call of
// action under target prefix prefix: its API's bound, never more than
// the gateway's MaxBodyBytes.
func (g *Gateway) awsBodyLimit(prefix, action string) int64 {
	b, ok := awsBodyBounds[prefix]
	if !ok {
		return g.maxBody
	}
	if b.tagged[action] {
		return min(b.tags, g.maxBody)
	}
	return min(b.all, g.maxBody)
}
