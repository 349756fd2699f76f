package cloudmap

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Sizes from the Cloud Map API reference.
const (
	maxIDLen        = 64   // ResourceId, InstanceId, OperationId, CreatorRequestId
	maxNameLen      = 1024 // HTTP namespace name, description
	maxDNSNameLen   = 253  // private DNS namespace name
	maxServiceLen   = 127  // service name
	maxAttrKeyLen   = 255  // attribute key
	maxAttrValueLen = 1024 // attribute value
	maxAttrTotal    = 5000 // all keys and values of one instance
	maxFilterValues = 1000 // values of a list filter, instance ids of GetInstancesHealthStatus
)

// printable reports whether s is 1 to max printable ASCII characters other
// than space ([!-~]).
func printable(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '!' || s[i] > '~' {
			return false
		}
	}
	return true
}

// checkRequired checks a required identifier-like member.
func checkRequired(field, v string, max int) error {
	switch {
	case v == "":
		return invalid("%s is required", field)
	case !printable(v, max):
		return invalid("%s %s must be 1 to %d printable ASCII characters without spaces", field, quote(v), max)
	}
	return nil
}

func checkOptional(field, v string, max int) error {
	if v == "" {
		return nil
	}
	return checkRequired(field, v, max)
}

func checkDescription(v string) error {
	if len(v) > maxNameLen || !utf8.ValidString(v) {
		return invalid("Description must be valid UTF-8 of at most %d bytes", maxNameLen)
	}
	return nil
}

// checkServiceName follows the API's pattern: DNS labels of letters, digits,
// '-' and '_' (1 to 63 each) joined by dots, at most 127 characters.
func checkServiceName(field, v string) error {
	if v == "" {
		return invalid("%s is required", field)
	}
	bad := invalid("%s %s must be up to %d characters of letters, digits, '-' and '_' in dot-separated labels", field, quote(v), maxServiceLen)
	if len(v) > maxServiceLen {
		return bad
	}
	label := 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '.':
			if label == 0 || v[i-1] == '-' {
				return bad
			}
			label = 0
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_':
			label++
		case c == '-' && label > 0:
			label++
		default:
			return bad
		}
		if label > 63 {
			return bad
		}
	}
	if label == 0 || v[len(v)-1] == '-' {
		return bad
	}
	return nil
}

func checkInstanceID(v string) error {
	if v == "" {
		return invalid("InstanceId is required")
	}
	if len(v) > maxIDLen {
		return invalid("InstanceId %s is longer than %d characters", quote(v), maxIDLen)
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '/' || c == ':' || c == '.' || c == '@' || c == '-') {
			return invalid("InstanceId %s may hold only letters, digits and _/:.@-", quote(v))
		}
	}
	return nil
}

// checkAttributes checks an instance's attributes against AWS's limits:
// at most maxCustom keys not starting with AWS_, keys of 1 to 255 and values
// as the model's AttrValue pattern allows (empty too), 5,000 characters in
// all, and the reserved AWS_INSTANCE_IPV4 / AWS_INSTANCE_IPV6 /
// AWS_INSTANCE_PORT / AWS_INIT_HEALTH_STATUS well formed.
func checkAttributes(attrs map[string]string, maxCustom int) error {
	total, custom := 0, 0
	for k, v := range attrs {
		if !printable(k, maxAttrKeyLen) {
			return invalid("attribute key %s must be 1 to %d printable ASCII characters without spaces", quote(k), maxAttrKeyLen)
		}
		if !attrValue(v) {
			return invalid("attribute %s: value must be at most %d printable ASCII characters (spaces and tabs inside, not first)", quote(k), maxAttrValueLen)
		}
		total += len(k) + len(v)
		if len(k) < 4 || k[:4] != "AWS_" {
			custom++
		}
		switch k {
		case "AWS_INSTANCE_IPV4":
			if a, err := netip.ParseAddr(v); err != nil || !a.Is4() {
				return invalid("attribute AWS_INSTANCE_IPV4 %s is not an IPv4 address", quote(v))
			}
		case "AWS_INSTANCE_IPV6":
			if a, err := netip.ParseAddr(v); err != nil || !a.Is6() || a.Is4In6() {
				return invalid("attribute AWS_INSTANCE_IPV6 %s is not an IPv6 address", quote(v))
			}
		case "AWS_INIT_HEALTH_STATUS":
			if v != "HEALTHY" && v != "UNHEALTHY" {
				return invalid("attribute AWS_INIT_HEALTH_STATUS %s is not HEALTHY or UNHEALTHY", quote(v))
			}
		case "AWS_INSTANCE_PORT":
			if p, err := strconv.Atoi(v); err != nil || p < 1 || p > 65535 {
				return invalid("attribute AWS_INSTANCE_PORT %s is not a port from 1 to 65535", quote(v))
			}
		}
	}
	if custom > maxCustom {
		return invalid("%d custom attributes; an instance may have at most %d", custom, maxCustom)
	}
	if total > maxAttrTotal {
		return invalid("attributes hold %d characters; keys and values may hold at most %d in all", total, maxAttrTotal)
	}
	return nil
}

// attrValue follows the model's AttrValue pattern: empty, or printable
// ASCII whose first character is not a space or tab, at most 1,024.
func attrValue(v string) bool {
	if len(v) > maxAttrValueLen {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !('!' <= c && c <= '~') && !(i > 0 && (c == ' ' || c == '\t')) {
			return false
		}
	}
	return true
}

// checkMaxResults returns the MaxResults to use: def when nil, else the
// value if it is within 1..max.
func checkMaxResults(v *int32, def, max int) (int, error) {
	if v == nil {
		return def, nil
	}
	if *v < 1 || int(*v) > max {
		return 0, invalid("MaxResults %d is not between 1 and %d", *v, max)
	}
	return int(*v), nil
}

// quote quotes s for a message, cut to 80 bytes.
func quote(s string) string {
	if len(s) > 80 {
		return strconv.Quote(s[:80]) + "…"
	}
	return strconv.Quote(s)
}

// checkTTL checks a required RecordTTL.
func checkTTL(ttl *int64) error {
	if ttl == nil || *ttl < 0 || *ttl > 2147483647 {
		return invalid("TTL is required, between 0 and 2147483647")
	}
	return nil
}

// checkDNSRecords checks a DnsRecordList: 1 to 4 records of type A, AAAA,
// SRV or CNAME, each with a TTL.
func checkDNSRecords(field string, recs []dnsRecordJSON) error {
	if len(recs) == 0 || len(recs) > 4 {
		return invalid("%s must hold 1 to 4 records", field)
	}
	for i, rec := range recs {
		if !slices.Contains([]string{"A", "AAAA", "SRV", "CNAME"}, rec.Type) {
			return invalid("%s[%d].Type %s is not A, AAAA, SRV or CNAME", field, i, quote(rec.Type))
		}
		if checkTTL(rec.TTL) != nil {
			return invalid("%s[%d].TTL is required, between 0 and 2147483647", field, i)
		}
	}
	return nil
}

// healthCheckJSON is a HealthCheckConfig (services of public DNS and
// HTTP namespaces): stored and served back, never run.
type healthCheckJSON struct {
	Type             string
	ResourcePath     string `json:",omitempty"`
	FailureThreshold *int32 `json:",omitempty"`
}

func checkHealthCheck(h *healthCheckJSON) error {
	if h == nil {
		return nil
	}
	if h.Type != "HTTP" && h.Type != "HTTPS" && h.Type != "TCP" {
		return invalid("HealthCheckConfig.Type %s is not HTTP, HTTPS or TCP", quote(h.Type))
	}
	if len(h.ResourcePath) > 255 {
		return invalid("HealthCheckConfig.ResourcePath is longer than 255 characters")
	}
	if h.FailureThreshold != nil && (*h.FailureThreshold < 1 || *h.FailureThreshold > 10) {
		return invalid("HealthCheckConfig.FailureThreshold %d is not between 1 and 10", *h.FailureThreshold)
	}
	return nil
}

// Bounds of tags: a request's TagList and TagKeyList hold at most
// maxTagList (the model), a resource at most maxTags (AWS: "each resource
// can have a maximum of 50 tags", TooManyTagsException's documentation).
const (
	maxTagList = 200
	maxTags    = 50
)

// checkTags checks a TagList for resource name: more than 50 distinct
// keys is TooManyTagsException; keys are 1 to 128 characters, values at
// most 256. A key given twice keeps its last value. It returns the tags
// sorted by key.
func checkTags(tags []tagJSON, resource string) ([]tagJSON, error) {
	if len(tags) > maxTagList {
		return nil, tooManyTags(len(tags), resource)
	}
	out, err := mergeTags(nil, tags)
	if err == nil && len(out) > maxTags {
		return nil, tooManyTags(len(out), resource)
	}
	return out, err
}

// tooManyTags is the error for n tags on resource.
func tooManyTags(n int, resource string) error {
	return &apiError{Code: codeTooManyTags, ResourceName: resource,
		Message: fmt.Sprintf("%d tags; a resource may have at most %d", n, maxTags)}
}

// mergeTags sets tags on old (replacing values of the same keys) and
// returns the result sorted by key.
func mergeTags(old, tags []tagJSON) ([]tagJSON, error) {
	m := make(map[string]string, len(old)+len(tags))
	for _, t := range old {
		m[t.Key] = t.Value
	}
	for _, t := range tags {
		if t.Key == "" || len(t.Key) > 128 || !utf8.ValidString(t.Key) {
			return nil, invalid("tag key %s must be 1 to 128 characters", quote(t.Key))
		}
		if len(t.Value) > 256 || !utf8.ValidString(t.Value) {
			return nil, invalid("tag %s: value longer than 256 characters", quote(t.Key))
		}
		m[t.Key] = t.Value
	}
	if len(m) == 0 {
		return nil, nil
	}
	out := make([]tagJSON, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, tagJSON{Key: k, Value: m[k]})
	}
	return out, nil
}
