// Package kube runs the instances of an autoscaled service as the pods of
// a Kubernetes Deployment: it is the [runner.Runner] behind `tollgate serve`
// for a service whose autoscale section names `kubernetes:` instead of a
// command. The pool decides how many instances run; this package makes
// the Deployment run that many pods and tells the pool which pod each
// instance is.
//
// # What it owns
//
//   - The replica count, written only through the scale subresource
//     (scale.ScalesGetter, as HPA and KEDA do), never by editing the
//     Deployment spec: a Get, then an Update carrying its resourceVersion,
//     only when the count changes, retried on conflict by a rate-limited
//     work queue. The count asked for is the number of live instances.
//   - Which pods are ready and where: an informer on the Service's
//     EndpointSlices (label kubernetes.io/service-name), the ready set
//     rebuilt from all of the Service's slices on every event (Ready==nil
//     counts as ready, addresses deduplicated, tombstones unwrapped).
//   - The pod behind each instance: a started instance binds to the next
//     ready pod no other instance holds; Ready waits for that. A bound pod
//     that leaves the ready set (deleted, not ready) closes its instance's
//     Done at once, with an error wrapping [ErrPodGone].
//   - Scale-down choice: Stop sets controller.kubernetes.io/pod-deletion-cost
//     on the instance's pod before the count is lowered, so the
//     ReplicaSet removes that pod and not a busy one.
//   - CPU: from metrics.k8s.io when it is served (PodMetrics usage,
//     integrated over time into a CPU time); otherwise CPUTime reports
//     false and the log says so once. While it is served, the pods are
//     listed when one not read yet is bound, for its CPU allocation
//     ([runner.CPUAllocator]): the sum of its containers' and native
//     sidecars' CPU limits (a request where a container sets no limit),
//     or the pod-level resources; the pool divides the pod's CPU usage by
//     it, not by the service's cpus.
//   - Several tollgate replicas (optional, [Options.Election]): only the
//     holder of a Lease writes replicas and deletion costs; every replica
//     watches and routes. Each reports on a second Lease (replicas.go) its
//     ask, the pods it holds, and its measured load: its engines' window
//     averages of the requests it proxied, CPU and ACT (total.go). The
//     holder sums the fresh reports and runs one Cloud Run decision on the
//     service's total with a pod's whole maximum concurrency, as Knative's
//     autoscaler does from every activator's stats; it publishes the
//     count, which every replica's engine follows (the policy of
//     [Runner.SharedPolicy], a [runner.LoadSharer]), writes it (or the
//     largest fresh ask when more: instances started on demand, or not let
//     go yet), and lets go only pods no replica holds. A replica not heard
//     from for the lease duration stops counting. The split of a pod among
//     replicas is for routing only ([Runner.Share]): each may send a pod
//     one request at once, and the rest of its maximum concurrency goes by
//     each replica's share of the load. The leader splits, from one view of
//     the reports (assign.go), publishes the split with a version, and
//     lowers shares before it raises any: a raise waits until every fresh
//     replica reports routing by the lowered split. So the replicas' shares
//     of a pod never sum above its maximum concurrency while they agree
//     on who is fresh (a replica that has just joined has one request per
//     pod until the split names it), and a pod's maximum concurrency stays
//     the hard limit Cloud Run's is. Requests a replica sent under a
//     larger share it has just lowered still count, for as long as they
//     run past the report of the lowered split (1.5 s after it adopted it).
//   - GPUs: the Deployment's pod template, read at start and every resync;
//     one whose containers request or limit nvidia.com/gpu makes a GPU
//     service ([Runner.GPUs], a [runner.GPURunner]): idle instances are kept
//     10 minutes at most.
//
// It never routes or proxies requests and never decides a count: package
// pool does. It never deletes a pod or edits a Deployment's spec.
//
// # Lifecycle
//
//   - [New](Options) checks the options; nothing starts.
//   - [Runner.Run](ctx) runs everything: the informer (its cache synced
//     before the first scale write, since a cold cache reads as no ready
//     pods), the work queue, the metrics poller and the scale writer
//     (directly, or inside OnStartedLeading with election). It returns
//     once every goroutine has stopped.
//   - [Runner.Start] registers an instance (the count asked for grows by
//     one) and returns at once; Instance.Ready waits until it is bound to
//     a ready pod; Instance.Addr is empty until then. Instance.Stop marks
//     the pod, lowers the count and waits up to the grace period for the
//     pod to leave the ready set.
//   - When Run's context ends, the Deployment keeps its replicas: a Stop
//     after that only releases the pod, and the next tollgate (a rolling
//     update of tollgate itself) adopts the ready pods, binding its new
//     instances to them, and scales down from there.
package kube
