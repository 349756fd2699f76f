package traffic_test

import (
	"fmt"
	"net/http/httptest"

	"github.com/tollgate/tollgate/pool/traffic"
)

// A 90/10 split with a tag on the new revision: every 100 untagged
// requests in a row give each revision exactly its share, and a Host
// CANARY---... reaches the tagged one.
func Example() {
	block := []traffic.Target{
		{RevisionName: "hello-00001", Percent: 90},
		{LatestRevision: true, Percent: 10, Tag: "canary"},
	}
	if err := traffic.Check("hello", block); err != nil {
		fmt.Println(err)
		return
	}
	rt := traffic.NewRouting(block, []string{"hello-00001", "hello-00002"}, "hello-00002", []string{"hello-00001", "hello-00002"})
	count := map[string]int{}
	for n := range uint64(100) {
		count[rt.Pick(n)]++
	}
	fmt.Println(count["hello-00001"], count["hello-00002"])

	r := httptest.NewRequest("GET", "/", nil)
	r.Host = "CANARY---hello.example.com"
	tagged, _ := rt.Tagged(traffic.RequestTag(r))
	fmt.Println(tagged)

	fmt.Println(traffic.Check("hello", []traffic.Target{{LatestRevision: true, Percent: 90}}))
	// Output:
	// 90 10
	// hello-00002
	// service hello: traffic: percents sum to 90, not 100
}
