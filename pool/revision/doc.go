// Package revision runs one revision of an autoscaled service, the way
// Cloud Run runs a revision's containers (SPEC §3): one autoscale.Engine,
// the instances a runner.Runner starts for it, its pending requests, and
// one loop that measures the instances once a second, feeds the engine
// and acts on its decisions. It serves the revision's requests
// (ServeHTTP: route, wait in the pending queue, proxy through
// pool/forward), checks the instances' liveness, replaces those that
// crash with a crash-loop backoff, and lists them in a service registry.
//
// A Revision knows no other revision: package pool holds a service's
// revisions and moves traffic among them, through the methods here and
// the State snapshot, each taken under the revision's lock.
package revision
