package kube_test

import (
	"fmt"

	"k8s.io/client-go/rest"

	"github.com/tollgate/tollgate/pool/kube"
)

// A runner for the Deployment "hello" in namespace "demo", its pods
// listed by the Service of the same name, requests going to pod port
// 8080. In a cluster the config comes from kube.LoadConfig; nothing
// reaches the API server until Run(ctx), and the pool starts instances.
func ExampleNew() {
	clients, err := kube.NewClients(&rest.Config{Host: "https://127.0.0.1:6443"})
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := kube.New(kube.Options{
		Target:  kube.Target{Namespace: "demo", Deployment: "hello", Port: 8080},
		Client:  clients.Client,
		Scales:  clients.Scales,
		Metrics: clients.Metrics,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	t := r.Target()
	fmt.Println(t, t.Service, t.Resource)
	// Output: demo/hello hello deployments.apps
}
