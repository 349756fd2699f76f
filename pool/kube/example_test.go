package kube_test

import (
	"fmt"

	"k8s.io/client-go/kubernetes/fake"
	scalefake "k8s.io/client-go/scale/fake"

	"github.com/tollgate/tollgate/pool/kube"
)

// A runner for the Deployment "hello" in namespace "demo", its pods
// listed by the Service of the same name, requests going to pod port
// 8080. In a cluster the clients come from kube.LoadConfig and
// kube.NewClients; then Run(ctx) runs it and the pool starts instances.
func ExampleNew() {
	r, err := kube.New(kube.Options{
		Target: kube.Target{Namespace: "demo", Deployment: "hello", Port: 8080},
		Client: fake.NewClientset(),
		Scales: &scalefake.FakeScaleClient{},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	t := r.Target()
	fmt.Println(t, t.Service, t.Resource)
	// Output: demo/hello hello deployments.apps
}
