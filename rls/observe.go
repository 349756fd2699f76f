package rls

import (
	"strings"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
)

// Observer hears every descriptor decided against a rule's limit: the
// live view's recorder, say. Decided is called on the decision path, so
// it must be quick and must not block.
type Observer interface {
	Decided(d Decided)
}

// Decided is one descriptor's decision, as an [Observer] hears it.
type Decided struct {
	// Domain is the request's domain; Rule the rule's key in it
	// ([Rule.Key], such as "message_type_marketing.to_number").
	Domain, Rule string
	// Descriptor is the bucket's descriptor, its entries as key=value
	// joined by commas (a share_threshold entry by its pattern).
	Descriptor string
	// Allowed is false for hits over the limit, shadow mode's included.
	Allowed bool
	// Used is the tokens in use after the decision, of Capacity.
	Used, Capacity int64
}

// descriptorText is the Decided.Descriptor of entries.
func descriptorText(entries []*ratelimitv3.RateLimitDescriptor_Entry, shared map[int]string) string {
	var b strings.Builder
	for i, e := range entries {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(e.GetKey())
		b.WriteByte('=')
		if p, ok := shared[i]; ok {
			b.WriteString(p)
		} else {
			b.WriteString(e.GetValue())
		}
	}
	return b.String()
}
