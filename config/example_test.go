package config_test

import (
	"fmt"
	"log"

	"github.com/tollgate/tollgate/config"
)

func Example() {
	cfg, err := config.Parse("tollgate.yaml", []byte(`
services:
  - preset: ecs
overrides:
  - service: ecs
    account: "123456789012"
    category: cluster-read
    capacity: 100
    refill_per_second: 40
`))
	if err != nil {
		log.Fatal(err)
	}
	key, limit, err := cfg.Quota.Resolve("ecs", "123456789012", "us-east-1", "ListClusters")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(key, limit)

	key, limit, _ = cfg.Quota.Resolve("ecs", "210987654321", "us-east-1", "DescribeClusters")
	fmt.Println(key, limit)
	// Output:
	// {ecs/123456789012}:us-east-1:cluster-read 100/40
	// {ecs/210987654321}:us-east-1:cluster-read 50/20
}

func ExampleParse_errors() {
	_, err := config.Parse("tollgate.yaml", []byte(`
services:
  - preset: ecs
  - name: orders
    categories:
      - {name: read, capacity: 0, refill_per_second: 20, actions: [GetOrder]}
`))
	fmt.Println(err)
	// Output:
	// tollgate.yaml:6:32: services[1].categories[0].capacity: capacity 0 must be at least 1
}
