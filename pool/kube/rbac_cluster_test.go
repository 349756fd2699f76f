package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// applyPolicies creates the ValidatingAdmissionPolicies and bindings of
// deploy/kubernetes/policy/policy.yaml for the test's namespace. They are
// cluster-scoped, and other tests share the cluster: each test gets its
// own copy, named after its namespace, bound to that namespace only, and
// deleted when the test ends. The policies' rules are the file's.
func applyPolicies(t *testing.T, c *cluster) {
	t.Helper()
	raw, err := os.ReadFile("../../deploy/kubernetes/policy/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	api := c.client.AdmissionregistrationV1()
	policies, bindings := 0, 0
	var names []string
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("policy.yaml: %v", err)
		}
		switch o := obj.(type) {
		case *admissionv1.ValidatingAdmissionPolicy:
			o.Name += "-" + c.ns
			_, err = api.ValidatingAdmissionPolicies().Create(ctx, o, metav1.CreateOptions{})
			name := o.Name
			names = append(names, name)
			t.Cleanup(func() { _ = api.ValidatingAdmissionPolicies().Delete(ctx, name, metav1.DeleteOptions{}) })
			policies++
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			if o.Spec.MatchResources != nil {
				t.Fatalf("policy.yaml: binding %s limits its resources; the test's namespace selector would replace that", o.Name)
			}
			o.Name += "-" + c.ns
			o.Spec.PolicyName += "-" + c.ns
			o.Spec.MatchResources = &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: c.ns},
			}}
			_, err = api.ValidatingAdmissionPolicyBindings().Create(ctx, o, metav1.CreateOptions{})
			name := o.Name
			t.Cleanup(func() { _ = api.ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{}) })
			bindings++
		default:
			t.Fatalf("policy.yaml: unexpected %T", obj)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if policies != 2 || bindings != 2 {
		t.Fatalf("policy.yaml holds %d policies and %d bindings, want 2 of each", policies, bindings)
	}
	// The API server type-checks a policy's expressions against the
	// schemas of what it matches, after creating it: a misspelt field is
	// only a warning in the policy's status, and a policy that denies
	// nothing.
	var warnings []string
	for _, name := range names {
		c.eventually(t, "policy "+name+" type-checked", func() error {
			p, err := api.ValidatingAdmissionPolicies().Get(ctx, name, metav1.GetOptions{})
			switch {
			case err != nil:
				return err
			case p.Status.ObservedGeneration != p.Generation || p.Status.TypeChecking == nil:
				return errors.New("not type-checked yet")
			}
			for _, w := range p.Status.TypeChecking.ExpressionWarnings {
				warnings = append(warnings, fmt.Sprintf("%s: %s: %s", name, w.FieldRef, w.Warning))
			}
			return nil
		})
	}
	if len(warnings) > 0 {
		t.Fatalf("policy.yaml does not type-check:\n%s", strings.Join(warnings, "\n"))
	}
}

// serviceAccountClient is a client authenticated as the namespace's
// ServiceAccount tollgate, with a token from the TokenRequest API.
func serviceAccountClient(t *testing.T, c *cluster) kubernetes.Interface {
	t.Helper()
	tok, err := c.client.CoreV1().ServiceAccounts(c.ns).CreateToken(context.Background(), "tollgate",
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(c.cfg)
	cfg.BearerToken = tok.Status.Token
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// eventually retries fn until it returns nil: a Role, a RoleBinding or an
// admission policy takes effect once the API server's caches have it.
func (c *cluster) eventually(t *testing.T, what string, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(clusterLong)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s: %v", clusterLong, what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// forbidden fails the test unless err is the API's 403 and its message
// holds want (RBAC's "cannot", or the admission policy's message).
func forbidden(t *testing.T, what string, err error, want string) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: allowed, want forbidden", what)
	case !apierrors.IsForbidden(err):
		t.Errorf("%s: %v (reason %q), want forbidden", what, err, apierrors.ReasonForError(err))
	case !strings.Contains(err.Error(), want):
		t.Errorf("%s: forbidden, but not by what should forbid it (%q): %v", what, want, err)
	default:
		t.Logf("%s: forbidden: %v", what, err)
	}
}

// pod creates a bare pod (kwok runs it) as the administrator.
func (c *cluster) pod(t *testing.T, name string, labels map[string]string) *corev1.Pod {
	t.Helper()
	p, err := c.client.CoreV1().Pods(c.ns).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{"owner": "admin"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "example.invalid/app:1",
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Under deploy/kubernetes/base/rbac.yaml and the admission policies of
// deploy/kubernetes/policy, the ServiceAccount can do what pool/kube does
// (scale hello, set a hello pod's deletion cost, hold and report on its
// two Leases) and nothing of what an audit of the old Role did: change an
// unrelated pod's image, relabel a pod, scale an unrelated Deployment from
// 0 to 1, update an unrelated Lease (or create one not named tollgate-…).
func TestClusterRBACForbids(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	applyRBAC(t, c)
	sa := serviceAccountClient(t, c)
	ns := c.ns

	// What the administrator sets up: another Deployment at 0, a pod of
	// hello's and an unrelated one, another controller's Lease.
	other := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "other"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "other", Image: "example.invalid/other:1"}}},
			},
		},
	}
	if _, err := c.client.AppsV1().Deployments(ns).Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	helloPod := c.pod(t, "hello-pod", map[string]string{"app": "hello", ScaledLabel: "true"})
	unrelated := c.pod(t, "unrelated", map[string]string{"app": "other"})
	if _, err := c.client.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "another-controller"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("someone")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Allowed. The first call waits for the Role to reach the
	// authorizer's cache.
	c.eventually(t, "the ServiceAccount reads hello's scale", func() error {
		_, err := sa.AppsV1().Deployments(ns).GetScale(ctx, "hello", metav1.GetOptions{})
		return err
	})
	scale, err := sa.AppsV1().Deployments(ns).GetScale(ctx, "hello", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scale.Spec.Replicas = 1
	if _, err := sa.AppsV1().Deployments(ns).UpdateScale(ctx, "hello", scale, metav1.UpdateOptions{}); err != nil {
		t.Errorf("scaling hello: %v", err)
	}
	if _, err := sa.AppsV1().Deployments(ns).Get(ctx, "hello", metav1.GetOptions{}); err != nil {
		t.Errorf("reading the Deployment hello: %v", err)
	}
	cost := func(v string) []byte {
		return []byte(`{"metadata":{"annotations":{"` + DeletionCostAnnotation + `":"` + v + `"}}}`)
	}
	// Each admission policy is in force once the API server's cache has
	// it and its binding, apart from the other: until then a relabelling,
	// and the creation of a Lease not named tollgate-… (dry runs), are let
	// through.
	refused := func(err error) error {
		if err == nil {
			return errors.New("allowed")
		}
		if apierrors.IsForbidden(err) {
			return nil
		}
		return err
	}
	dryRun := []string{metav1.DryRunAll}
	c.eventually(t, "the pod policy refuses a relabelling (dry run)", func() error {
		_, err := sa.CoreV1().Pods(ns).Patch(ctx, unrelated.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"hello"}}}`),
			metav1.PatchOptions{DryRun: dryRun})
		return refused(err)
	})
	c.eventually(t, "the Lease policy refuses a Lease not named tollgate-… (dry run)", func() error {
		_, err := sa.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "kube-something"}},
			metav1.CreateOptions{DryRun: dryRun})
		return refused(err)
	})
	// The pod patch the runner makes (markForDeletion).
	if _, err := sa.CoreV1().Pods(ns).Patch(ctx, helloPod.Name, types.MergePatchType, cost("-2147483648"), metav1.PatchOptions{}); err != nil {
		t.Errorf("setting a hello pod's deletion cost: %v", err)
	}
	if _, err := sa.CoreV1().Pods(ns).Patch(ctx, helloPod.Name, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+DeletionCostAnnotation+`":null}}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("removing a hello pod's deletion cost: %v", err)
	}
	// Another Deployment's pod (no tollgate.dev/scaled label): its
	// deletion cost would steer what its ReplicaSet deletes.
	if _, err := sa.CoreV1().Pods(ns).Patch(ctx, unrelated.Name, types.MergePatchType, cost("200"), metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("setting an unrelated pod's deletion cost: %v, want Forbidden", err)
	}
	if _, err := sa.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=hello"}); err != nil {
		t.Errorf("listing pods (CPU limits): %v", err)
	}
	// Leader election's Lease: created (any name may be created, but the
	// policy admits only tollgate-…), read, updated.
	leases := sa.CoordinationV1().Leases(ns)
	elect, err := leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "tollgate-hello"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("replica-a")},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the Lease tollgate-hello: %v", err)
	}
	if elect, err = leases.Get(ctx, "tollgate-hello", metav1.GetOptions{}); err != nil {
		t.Fatalf("reading the Lease tollgate-hello: %v", err)
	}
	elect.Spec.HolderIdentity = ptr.To("replica-b")
	if _, err := leases.Update(ctx, elect, metav1.UpdateOptions{}); err != nil {
		t.Errorf("updating the Lease tollgate-hello: %v", err)
	}
	// The report Lease: created, merge-patched, read, listed and watched
	// by name.
	const report = "tollgate-hello-replicas"
	if _, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: report}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the Lease %s: %v", report, err)
	}
	if _, err := leases.Patch(ctx, report, types.MergePatchType, []byte(`{"metadata":{"annotations":{"tollgate.dev/replica-a":"{}"}}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("patching the Lease %s: %v", report, err)
	}
	if _, err := leases.Get(ctx, report, metav1.GetOptions{}); err != nil {
		t.Errorf("reading the Lease %s: %v", report, err)
	}
	byName := metav1.ListOptions{FieldSelector: "metadata.name=" + report}
	if l, err := leases.List(ctx, byName); err != nil || len(l.Items) != 1 {
		t.Errorf("listing the Lease %s by name: %v", report, err)
	}
	wctx, cancel := context.WithTimeout(ctx, clusterLong)
	defer cancel()
	if w, err := leases.Watch(wctx, byName); err != nil {
		t.Errorf("watching the Lease %s by name: %v", report, err)
	} else {
		w.Stop()
	}

	// Forbidden: the four actions of the audit, by RBAC or by the policy.
	const byPolicy = "tollgate may change only the pod-deletion-cost annotation"
	_, err = sa.CoreV1().Pods(ns).Patch(ctx, unrelated.Name, types.StrategicMergePatchType,
		[]byte(`{"spec":{"containers":[{"name":"app","image":"example.invalid/evil:1"}]}}`), metav1.PatchOptions{})
	forbidden(t, "changing an unrelated pod's image", err, byPolicy)
	_, err = sa.CoreV1().Pods(ns).Patch(ctx, helloPod.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"elsewhere"}}}`), metav1.PatchOptions{})
	forbidden(t, "relabelling a pod", err, byPolicy)
	_, err = sa.AppsV1().Deployments(ns).UpdateScale(ctx, "other", &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns},
		Spec:       autoscalingv1.ScaleSpec{Replicas: 1},
	}, metav1.UpdateOptions{})
	forbidden(t, "scaling an unrelated Deployment from 0 to 1", err, "cannot update resource \"deployments/scale\"")
	another, err := c.client.CoordinationV1().Leases(ns).Get(ctx, "another-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	another.Spec.HolderIdentity = ptr.To("tollgate")
	_, err = leases.Update(ctx, another, metav1.UpdateOptions{})
	forbidden(t, "updating an unrelated Lease", err, "cannot update resource \"leases\"")

	// And around them: the rest of what the old Role let through.
	_, err = sa.CoreV1().Pods(ns).Patch(ctx, helloPod.Name, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"owner":"tollgate","`+DeletionCostAnnotation+`":"1"}}}`), metav1.PatchOptions{})
	forbidden(t, "changing another annotation beside the deletion cost", err, byPolicy)
	_, err = sa.CoreV1().Pods(ns).Patch(ctx, helloPod.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":["example.com/hold"]}}`), metav1.PatchOptions{})
	forbidden(t, "adding a finalizer to a pod", err, byPolicy)
	if _, err = sa.CoreV1().Pods(ns).Patch(ctx, helloPod.Name, types.MergePatchType, cost("cheap"), metav1.PatchOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("a deletion cost that is not an integer: %v, want the API's own validation error", err)
	}
	_, err = sa.AppsV1().Deployments(ns).GetScale(ctx, "other", metav1.GetOptions{})
	forbidden(t, "reading an unrelated Deployment's scale", err, "cannot get resource \"deployments/scale\"")
	_, err = sa.AppsV1().Deployments(ns).Patch(ctx, "hello", types.MergePatchType, []byte(`{"spec":{"replicas":3}}`), metav1.PatchOptions{})
	forbidden(t, "patching hello's Deployment (not its scale)", err, "cannot patch resource \"deployments\"")
	_, err = leases.Patch(ctx, "another-controller", types.MergePatchType, []byte(`{"spec":{"holderIdentity":"tollgate"}}`), metav1.PatchOptions{})
	forbidden(t, "patching an unrelated Lease", err, "cannot patch resource \"leases\"")
	_, err = leases.List(ctx, metav1.ListOptions{})
	forbidden(t, "listing every Lease", err, "cannot list resource \"leases\"")
	_, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "kube-something"}}, metav1.CreateOptions{})
	forbidden(t, "creating a Lease not named tollgate-…", err, "tollgate may create only Leases named tollgate-")
	err = sa.CoreV1().Pods(ns).Delete(ctx, unrelated.Name, metav1.DeleteOptions{})
	forbidden(t, "deleting a pod", err, "cannot delete resource \"pods\"")

	// Nothing forbidden happened.
	if p, err := c.client.CoreV1().Pods(ns).Get(ctx, unrelated.Name, metav1.GetOptions{}); err != nil {
		t.Error(err)
	} else if img := p.Spec.Containers[0].Image; img != "example.invalid/app:1" || p.Labels["app"] != "other" {
		t.Errorf("the unrelated pod after the attempts: image %s, labels %v", img, p.Labels)
	}
	if p, err := c.client.CoreV1().Pods(ns).Get(ctx, helloPod.Name, metav1.GetOptions{}); err != nil {
		t.Error(err)
	} else if p.Labels["app"] != "hello" || p.Annotations["owner"] != "admin" || len(p.Finalizers) != 0 {
		t.Errorf("hello's pod after the attempts: labels %v, annotations %v, finalizers %v", p.Labels, p.Annotations, p.Finalizers)
	}
	if s, err := c.client.AppsV1().Deployments(ns).GetScale(ctx, "other", metav1.GetOptions{}); err != nil {
		t.Error(err)
	} else if s.Spec.Replicas != 0 {
		t.Errorf("the unrelated Deployment has %d replicas after the attempts", s.Spec.Replicas)
	}
	if l, err := c.client.CoordinationV1().Leases(ns).Get(ctx, "another-controller", metav1.GetOptions{}); err != nil {
		t.Error(err)
	} else if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != "someone" {
		t.Errorf("the unrelated Lease is held by %q after the attempts", h)
	}
}
