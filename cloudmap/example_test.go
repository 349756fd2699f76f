package cloudmap_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/tollgate/tollgate/cloudmap"
)

// A pool registers an instance through the Go API; a client discovers it
// with the Cloud Map API.
func ExampleRegistry() {
	r, err := cloudmap.New(cloudmap.Options{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	err = r.RegisterInstance(ctx, cloudmap.DefaultScope, "example.local", "web", "web-1",
		map[string]string{"AWS_INSTANCE_IPV4": "127.0.0.1", "AWS_INSTANCE_PORT": "8081"})
	if err != nil {
		panic(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(
		`{"NamespaceName":"example.local","ServiceName":"web"}`))
	req.Header.Set("X-Amz-Target", "Route53AutoNaming_v20170314.DiscoverInstances")
	w := httptest.NewRecorder()
	r.ServeHTTP(w, req)
	body, _ := io.ReadAll(w.Body)
	fmt.Println(w.Code, string(body))
	// Output:
	// 200 {"Instances":[{"Attributes":{"AWS_INSTANCE_IPV4":"127.0.0.1","AWS_INSTANCE_PORT":"8081"},"HealthStatus":"HEALTHY","InstanceId":"web-1","NamespaceName":"example.local","ServiceName":"web"}],"InstancesRevision":3}
}
