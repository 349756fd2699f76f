package pooltest_test

import (
	"fmt"

	"github.com/tollgate/tollgate/pool/pooltest"
)

// A runner's own test runs the whole suite with a factory that makes a
// runner of the test service, as pool/process does:
//
//	func TestConformance(t *testing.T) {
//		pooltest.Run(t, func(t *testing.T, cfg pooltest.Config) pool.Runner {
//			r, err := process.New(process.Options{
//				Command:   testservice.Build(t),
//				Env:       cfg.Env,
//				Readiness: process.Readiness{Path: cfg.ReadyPath, Timeout: cfg.ReadyTimeout},
//				StopGrace: cfg.StopGrace,
//			})
//			if err != nil {
//				t.Fatal(err)
//			}
//			return r
//		})
//	}
//
// Each instance the suite starts has a spec of its own.
func ExampleSpec() {
	a, b := pooltest.Spec(), pooltest.Spec()
	fmt.Println(a.Service, a.Revision, a.ID != b.ID)
	// Output: svc svc-00001 true
}
