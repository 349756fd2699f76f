package replay

import (
	"hash/maphash"
	"testing"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/sim"
)

// TestBucketsOfOneHashAreChained finds buckets whose keys share a hash
// through the chain run.bucket keeps, as a million tenants' keys may: two
// keys are made to collide by linking the second behind the first's hash.
func TestBucketsOfOneHashAreChained(t *testing.T) {
	p, err := sim.NewPlayer([]sim.Retry{{Disabled: true}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	r := newRun(Options{Groups: []Group{{Name: "default"}}}, p)
	lim := bucket.MustLimit(10, 5)
	a := quota.Key{Service: "ecs", Account: "111111111111", Region: "us-east-1", Category: "cluster-read"}
	b := quota.Key{Service: "ecs", Account: "222222222222", Region: "us-east-1", Category: "cluster-read"}
	c := quota.Key{Service: "ecs", Account: "333333333333", Region: "us-east-1", Category: "cluster-read"}
	ia, ib := r.bucket(a, lim, 0), r.bucket(b, lim, 0)
	// b as if its hash were a's: a's hash leads to b, b's chain to a.
	ha := maphash.Comparable(r.seed, r.stats.intern(a))
	hb := maphash.Comparable(r.seed, r.stats.intern(b))
	delete(r.buckets, hb)
	r.buckets[ha] = ib
	r.stats.at(int(ib)).next = ia
	if got := r.bucket(a, lim, 0); got != ia {
		t.Errorf("a's bucket behind b on one hash: got %d, want %d", got, ia)
	}
	ic := r.bucket(c, lim, 0)
	if ic == ia || ic == ib || r.stats.len() != 3 {
		t.Errorf("a third key: bucket %d of %d, want a new one (a %d, b %d)", ic, r.stats.len(), ia, ib)
	}
	for i, k := range []quota.Key{a, b, c} {
		if got := r.stats.key(i); got != k {
			t.Errorf("bucket %d's key: got %v, want %v", i, got, k)
		}
	}
}
