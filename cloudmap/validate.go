package cloudmap

import (
	"net/netip"
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
// of 1 to 1024 printable characters, 5,000 characters in all, and the
// reserved AWS_INSTANCE_IPV4 / AWS_INSTANCE_IPV6 / AWS_INSTANCE_PORT well
// formed.
func checkAttributes(attrs map[string]string, maxCustom int) error {
	total, custom := 0, 0
	for k, v := range attrs {
		if !printable(k, maxAttrKeyLen) {
			return invalid("attribute key %s must be 1 to %d printable ASCII characters without spaces", quote(k), maxAttrKeyLen)
		}
		if v == "" || len(v) > maxAttrValueLen || !utf8.ValidString(v) {
			return invalid("attribute %s: value must be 1 to %d characters", quote(k), maxAttrValueLen)
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
