package quota_test

import (
	"fmt"
	"log"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/quota"
)

func Example() {
	ecs, err := quota.Preset("ecs")
	if err != nil {
		log.Fatal(err)
	}
	cfg, err := quota.NewConfig([]*quota.Service{ecs}, []quota.Override{{
		Service: "ecs", Account: "123456789012", Category: "cluster-read", Limit: bucket.MustLimit(100, 40),
	}}, nil)
	if err != nil {
		log.Fatal(err)
	}
	key, limit, err := cfg.Resolve("ecs", "123456789012", "us-east-1", "ListClusters")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(key, limit)

	key, limit, _ = cfg.Resolve("ecs", "210987654321", "us-east-1", "DescribeClusters")
	fmt.Println(key, limit)
	// Output:
	// {ecs/123456789012}:us-east-1:cluster-read 100/40
	// {ecs/210987654321}:us-east-1:cluster-read 50/20
}
