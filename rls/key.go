package rls

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
)

// BucketKey is the limiter key of one descriptor's bucket:
//
//	{rls:domain/key1=value1/key2=value2}
//
// Every entry's value is part of the key, so a rule without a value has
// one bucket per distinct value, as in envoy ratelimit. An entry matched
// through a share_threshold wildcard contributes its pattern instead
// (shared[i]), so all values it matches share one bucket. Bytes that would
// make the key ambiguous ('%', '/', '=', '{', '}') are percent-escaped. The
// whole key is its own Redis Cluster hash tag, so descriptors spread over
// the cluster, and the "rls:" prefix keeps these buckets apart from the
// gateway's ("{ecs/…}").
//
// A key longer than MaxKeyBytes is replaced by its SHA-256,
// "{rls:#<64 hex digits>}", so that a client sending long values cannot
// make one bucket cost more than a short one in the store.
func BucketKey(domain string, entries []*ratelimitv3.RateLimitDescriptor_Entry, shared map[int]string) string {
	n := len("{rls:}") + len(domain)
	for _, e := range entries {
		n += 2 + len(e.GetKey()) + len(e.GetValue())
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString("{rls:")
	escape(&b, domain)
	for i, e := range entries {
		b.WriteByte('/')
		escape(&b, e.GetKey())
		b.WriteByte('=')
		v := e.GetValue()
		if p, ok := shared[i]; ok {
			v = p
		}
		escape(&b, v)
	}
	b.WriteByte('}')
	if b.Len() > MaxKeyBytes {
		sum := sha256.Sum256([]byte(b.String()))
		return "{rls:#" + hex.EncodeToString(sum[:]) + "}"
	}
	return b.String()
}

// MaxKeyBytes is the longest bucket key [BucketKey] writes out; longer
// ones are hashed.
const MaxKeyBytes = 512

func escape(b *strings.Builder, s string) {
	if !strings.ContainsAny(s, "%/={}") {
		b.WriteString(s)
		return
	}
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '%', '/', '=', '{', '}':
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		default:
			b.WriteByte(c)
		}
	}
}
