package rls

import (
	"strings"
	"testing"
)

func TestBucketKey(t *testing.T) {
	for _, c := range []struct {
		domain string
		pairs  []string
		shared map[int]string
		want   string
	}{
		{"messaging", []string{"message_type=marketing", "to_number=2061111111"}, nil, "{rls:messaging/message_type=marketing/to_number=2061111111}"},
		{"d", []string{"files=files/a.pdf"}, map[int]string{0: "files/*"}, "{rls:d/files=files%2F*}"},
		{"a/b", []string{"k={x}=%"}, nil, "{rls:a%2Fb/k=%7Bx%7D%3D%25}"},
	} {
		if got := BucketKey(c.domain, desc(c.pairs...).Entries, c.shared); got != c.want {
			t.Errorf("BucketKey(%q, %v) = %q, want %q", c.domain, c.pairs, got, c.want)
		}
	}
	// Separators inside names never make two descriptors one bucket.
	a := BucketKey("d", desc("a/b=c").Entries, nil)
	b := BucketKey("d", desc("a=b/c").Entries, nil)
	c := BucketKey("d/a", desc("b=c").Entries, nil)
	if a == b || a == c || b == c {
		t.Errorf("collision: %q %q %q", a, b, c)
	}
	// A long key is hashed: bounded, and still one bucket per value.
	long1 := BucketKey("d", desc("k="+strings.Repeat("x", 1<<20)).Entries, nil)
	long2 := BucketKey("d", desc("k="+strings.Repeat("x", 1<<20-1)+"y").Entries, nil)
	if len(long1) != len("{rls:#}")+64 || !strings.HasPrefix(long1, "{rls:#") || long1 == long2 {
		t.Errorf("long keys: %q %q", long1, long2)
	}
	if k := BucketKey("d", desc("k="+strings.Repeat("x", MaxKeyBytes-len("{rls:d/k=}"))).Entries, nil); len(k) != MaxKeyBytes || strings.Contains(k, "#") {
		t.Errorf("a key of MaxKeyBytes is kept as is: %q", k)
	}
}
