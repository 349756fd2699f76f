package kube

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// DeletionCostAnnotation is the pod annotation a ReplicaSet ranks pods by
// when it scales down: the lowest cost goes first.
const DeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

// ScaledLabel, set to "true" on the pod template of a Deployment tollgate
// scales, is what deploy/kubernetes/policy's admission policy requires of
// a pod before tollgate's ServiceAccount may set its deletion cost: a
// pod of another Deployment in the namespace cannot be steered.
const ScaledLabel = "tollgate.dev/scaled"

// lowestCost is the deletion cost that makes the ReplicaSet remove a pod
// first.
var lowestCost = strconv.Itoa(math.MinInt32)

// maxRetries bounds how often one failing sync is retried before it waits
// for the next event or resync.
const maxRetries = 8

// Run watches the Service's EndpointSlices, reads pod CPU and writes the
// replica count (directly, or while leading with Options.Election) until
// ctx ends; it returns once every goroutine it started has stopped, nil
// then, or an error if the informer could not start.
func (r *Runner) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return errNotRunning
	}
	t := r.o.Target
	// The EndpointSlices of the Service, listed and watched through the
	// typed discovery/v1 client, as the informer factory's informer does
	// (NewTypedEndpointSliceInformerWithOptions): a client that does not
	// serve watch-list semantics (the fake clientset) is listed, then
	// watched.
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: t.Service}).String()
	slices := r.o.Client.DiscoveryV1().EndpointSlices(t.Namespace)
	inf := newInformer(r.o.Client, slices.List, slices.Watch, func(lo *metav1.ListOptions) { lo.LabelSelector = sel },
		&discoveryv1.EndpointSlice{}, cache.SharedIndexInformerOptions{
			Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		})
	r.lister = discoverylisters.NewEndpointSliceLister(inf.GetIndexer())

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	context.AfterFunc(ctx, func() { close(r.closed) })
	epq := newQueue("endpoints-" + t.String())
	stop := context.AfterFunc(ctx, epq.ShutDown)
	defer stop()
	r.epKick = func() { epq.Add(t.Service) }
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { r.epKick() },
		UpdateFunc: func(any, any) { r.epKick() },
		DeleteFunc: func(obj any) {
			if s := endpointSliceFromDeleteObj(obj); s != nil {
				r.epKick()
			}
		},
	}); err != nil {
		return fmt.Errorf("kube %s: watching EndpointSlices: %w", t, err)
	}
	informed := make(chan struct{})
	go func() {
		defer close(informed)
		inf.RunWithContext(ctx)
	}()
	defer func() { cancel(); <-informed }() // the informer's goroutines have stopped
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil // ctx ended before the first list
	}
	r.checkDeployment(ctx)
	r.epKick()

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		r.work(ctx, epq, func(context.Context) error { return r.syncEndpoints() })
		return nil
	})
	if r.o.Metrics != nil {
		g.Go(func() error { r.pollCPU(ctx); return nil })
	} else {
		r.log.Info("no metrics.k8s.io client: pod CPU not measured, scaling on concurrency and ACT only")
	}
	if r.shared() {
		g.Go(func() error { return r.runReports(ctx) })
	}
	if t.Resource == deployments {
		g.Go(func() error { r.watchTemplate(ctx); return nil })
	}
	g.Go(func() error {
		if r.o.Election == nil {
			r.lead(ctx)
			return nil
		}
		return r.elect(ctx)
	})
	return g.Wait()
}

// newInformer is a shared informer on one typed client's List and Watch,
// each narrowed by narrow (a label or field selector), built as client-go's
// generated informers build theirs, with the watch-list wrapper: a client
// that does not serve watch-list semantics (the fake clientset) is listed,
// then watched.
func newInformer[L runtime.Object](client Client, list func(context.Context, metav1.ListOptions) (L, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error), narrow func(*metav1.ListOptions),
	obj runtime.Object, opts cache.SharedIndexInformerOptions) cache.SharedIndexInformer {
	return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, lo metav1.ListOptions) (runtime.Object, error) {
			narrow(&lo)
			return list(ctx, lo)
		},
		WatchFuncWithContext: func(ctx context.Context, lo metav1.ListOptions) (watch.Interface, error) {
			narrow(&lo)
			return watchFn(ctx, lo)
		},
	}, client), obj, opts)
}

// lead runs the scale loop while this runner may write replicas.
func (r *Runner) lead(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	r.leading.Store(true)
	r.m.leader.Set(1)
	defer func() {
		r.leading.Store(false)
		r.m.leader.Set(0)
	}()
	const key = "scale"
	q := newQueue("scale-" + r.o.Target.String())
	r.mu.Lock()
	clear(r.victims)
	r.swept = false
	// The split starts from the one this replica routes by (an earlier
	// leader's, or none), lowered first like any other change.
	r.plan = sharePlan{Pub: r.shares.Cur, Target: r.plan.Target, TakeOver: true}
	r.requeue = func(d time.Duration) { q.AddAfter(key, d) }
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.work(ctx, q, r.syncScale)
	}()
	defer func() {
		q.ShutDown()
		<-done // no sync runs from here on
		r.mu.Lock()
		r.requeue = func(time.Duration) {}
		clear(r.victims) // the next leader chooses its own
		r.retiringGen++
		r.bindLocked()
		r.mu.Unlock()
		r.reportNow() // withdraw the retiring list now
	}()
	t := time.NewTicker(r.o.Resync)
	defer t.Stop()
	adopt := time.NewTimer(max(r.o.AdoptFor, 0))
	defer adopt.Stop()
	r.adoptUntil.Store(time.Now().Add(r.o.AdoptFor).UnixNano())
	q.Add(key)
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
			q.Add(key)
		case <-t.C:
			q.Add(key)
		case <-adopt.C:
			q.Add(key)
		}
	}
}

func newQueue(name string) workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name})
}

// work processes q's keys with sync until q shuts down.
func (r *Runner) work(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], sync func(context.Context) error) {
	for r.processNextItem(ctx, q, sync) {
	}
}

func (r *Runner) processNextItem(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], sync func(context.Context) error) bool {
	key, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(key)
	r.handleErr(ctx, q, key, sync(ctx))
	return true
}

// handleErr is the only place that decides on retries.
func (r *Runner) handleErr(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], key string, err error) {
	if err == nil {
		q.Forget(key)
		return
	}
	if ctx.Err() != nil {
		q.Forget(key)
		return
	}
	if n := q.NumRequeues(key); n < maxRetries {
		r.log.Debug("sync failed; retrying", "key", key, "retry", n+1, "error", err)
		q.AddRateLimited(key)
		return
	}
	q.Forget(key)
	r.log.Warn("sync failed repeatedly; waiting for the next event or resync", "key", key, "error", err)
}

// syncEndpoints rebuilds the ready set from all of the Service's slices.
func (r *Runner) syncEndpoints() error {
	t := r.o.Target
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: t.Service})
	list, err := r.lister.EndpointSlices(t.Namespace).List(sel)
	if err != nil {
		return fmt.Errorf("listing EndpointSlices: %w", err)
	}
	ready, listed := readySet(list, t.Port)
	r.setReady(ready, listed)
	return nil
}

// readySet collects the ready endpoints of a Service's slices, keyed by
// pod name (or address when an endpoint names no pod), and every key
// listed at all. Ready==nil counts as ready (the API's rule); an endpoint
// in several slices counts once. port 0 takes the slice's only port.
func readySet(list []*discoveryv1.EndpointSlice, port int) (map[string]endpoint, map[string]bool) {
	ready, listed := map[string]endpoint{}, map[string]bool{}
	for _, s := range list {
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		p := port
		if p == 0 {
			if len(s.Ports) != 1 || s.Ports[0].Port == nil {
				continue
			}
			p = int(*s.Ports[0].Port)
		}
		for _, ep := range s.Endpoints {
			if len(ep.Addresses) == 0 {
				continue
			}
			key, pod := ep.Addresses[0], ""
			if ref := ep.TargetRef; ref != nil && ref.Kind == "Pod" && ref.Name != "" {
				key, pod = ref.Name, ref.Name
			}
			listed[key] = true
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			if _, dup := ready[key]; dup {
				continue
			}
			ready[key] = endpoint{pod: pod, ip: ep.Addresses[0], port: p}
		}
	}
	return ready, listed
}

// endpointSliceFromDeleteObj unwraps a delete event, tombstone or not.
func endpointSliceFromDeleteObj(obj any) *discoveryv1.EndpointSlice {
	if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
		return s
	}
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		if s, ok := tomb.Obj.(*discoveryv1.EndpointSlice); ok {
			return s
		}
	}
	return nil
}

// syncScale reads the scale subresource and, when the count differs from
// the live instances, writes it (the Update carries the Get's
// resourceVersion, so a concurrent change is a conflict, retried).
func (r *Runner) syncScale(ctx context.Context) error {
	t := r.o.Target
	sc := r.o.Scales.Scales(t.Namespace)
	s, err := sc.Get(ctx, t.Resource, t.Deployment, metav1.GetOptions{})
	if err != nil {
		r.m.apiErrors.WithLabelValues("get_scale").Inc()
		return fmt.Errorf("reading the scale of %s: %w", t, err)
	}
	r.m.reported.Set(float64(s.Status.Replicas))
	if r.shared() {
		return r.syncShared(ctx, s)
	}
	now := time.Now()
	r.mu.Lock()
	r.selector = s.Status.Selector
	want := int32(r.live)
	surplus := r.freeLocked()
	r.mu.Unlock()
	r.m.desired.Set(float64(want))
	from := s.Spec.Replicas
	if from == want {
		return nil
	}
	if want < from && now.UnixNano() < r.adoptUntil.Load() {
		r.log.Debug("not lowering replicas yet: adopting the running pods", "replicas", from, "want", want)
		return nil
	}
	if n := int(from - want); n > 0 {
		// Ready pods no instance holds go first, then the ReplicaSet's
		// own ranking (not ready before ready).
		for _, key := range surplus[:min(n, len(surplus))] {
			r.mu.Lock()
			pod := r.ready[key].pod
			r.mu.Unlock()
			if pod != "" {
				_ = r.markForDeletion(ctx, pod) // counted and logged there
			}
		}
	}
	return r.writeReplicas(ctx, s, want)
}

// writeReplicas updates the scale read as s to want replicas.
func (r *Runner) writeReplicas(ctx context.Context, s *autoscalingv1.Scale, want int32) error {
	t := r.o.Target
	from := s.Spec.Replicas
	s.Spec.Replicas = want
	if _, err := r.o.Scales.Scales(t.Namespace).Update(ctx, t.Resource, s, metav1.UpdateOptions{}); err != nil {
		op := "update_scale"
		if apierrors.IsConflict(err) {
			op = "update_scale_conflict"
		}
		r.m.apiErrors.WithLabelValues(op).Inc()
		return fmt.Errorf("setting the replicas of %s to %d: %w", t, want, err)
	}
	r.m.writes.Inc()
	r.log.Info("replicas set", "from", from, "to", want, "reported", s.Status.Replicas)
	return nil
}

// markForDeletion sets the lowest deletion cost on pod, so that the
// ReplicaSet removes it first when replicas are lowered.
func (r *Runner) markForDeletion(ctx context.Context, pod string) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, DeletionCostAnnotation, lowestCost)
	_, err := r.o.Client.CoreV1().Pods(r.o.Target.Namespace).Patch(ctx, pod, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		r.m.apiErrors.WithLabelValues("patch_pod").Inc()
		r.log.Warn("could not set the deletion cost of a pod; the ReplicaSet picks which pod goes", "pod", pod, "error", err)
		return fmt.Errorf("marking pod %s for deletion: %w", pod, err)
	}
	if r.shared() {
		r.mu.Lock()
		r.marked[pod] = true
		r.mu.Unlock()
	}
	return nil
}

// checkDeployment logs, once at start, whether the scaled Deployment
// exists; a missing one is not fatal (it may be created later).
func (r *Runner) checkDeployment(ctx context.Context) {
	t := r.o.Target
	if t.Resource != deployments {
		return
	}
	d, err := r.o.Client.AppsV1().Deployments(t.Namespace).Get(ctx, t.Deployment, metav1.GetOptions{})
	if err != nil {
		r.m.apiErrors.WithLabelValues("get_deployment").Inc()
		r.log.Warn("cannot read the Deployment; scaling will be retried", "error", err)
		return
	}
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	r.log.Info("watching Deployment", "service", t.Service, "replicas", replicas, "ready", d.Status.ReadyReplicas)
	r.setTemplateGPUs(&d.Spec.Template.Spec)
	if d.Spec.Template.Labels[ScaledLabel] != "true" {
		r.log.Warn("the Deployment's pod template lacks the label "+ScaledLabel+": \"true\"; under deploy/kubernetes/policy tollgate may not set its pods' deletion cost, and then does not lower replicas below pods it holds",
			"deployment", t.Deployment)
	}
}
