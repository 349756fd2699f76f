package kube

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"github.com/tollgate/tollgate/config"
)

// The manifests of deploy/kubernetes are rendered with `kubectl kustomize`
// (Debian's kubectl package has kustomize built in); with TOLLGATE_KUBE=1
// they are also applied to the local control plane with --dry-run=server.

const manifests = "../../deploy/kubernetes"

// kubectl is the kubectl binary; the test skips without one, and fails
// under CI=true.
func kubectl(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("kubectl")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("kubectl (Debian package kubectl) is needed to render deploy/kubernetes: %v", err)
		}
		t.Skipf("no kubectl (Debian package kubectl) to render deploy/kubernetes: %v", err)
	}
	return p
}

// runKubectl runs kubectl with args and stdin, failing the test on an error.
func runKubectl(t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(kubectl(t), args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out.Bytes()
}

// userOverlay is what deploy/kubernetes/overlays/demo tells a user to do:
// a copy of it, in a directory of their own, with their namespace and
// images. It returns the directory.
func userOverlay(t *testing.T, ns string) string {
	t.Helper()
	demo, err := filepath.Abs(filepath.Join(manifests, "overlays", "demo"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	base, err := filepath.Rel(dir, filepath.Join(demo, "..", "..", "base")) // kustomize takes no absolute paths
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(demo, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	k := string(raw)
	for _, r := range [][2]string{
		{"\nnamespace: demo\n", "\nnamespace: " + ns + "\n"},
		{"\n  - ../../base\n", "\n  - " + base + "\n"},
		{"\n  - name: tollgate\n    newTag: dev\n", "\n  - name: tollgate\n    newName: registry.example/tollgate\n    newTag: v9\n"},
		{"\n  - name: hello\n    newTag: dev\n", "\n  - name: hello\n    newName: registry.example/hello\n    newTag: v9\n"},
	} {
		if !strings.Contains(k, r[0]) {
			t.Fatalf("overlays/demo/kustomization.yaml no longer holds %q: update this test", r[0])
		}
		k = strings.Replace(k, r[0], r[1], 1)
	}
	nsYAML, err := os.ReadFile(filepath.Join(demo, "namespace.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"kustomization.yaml": []byte(k), "namespace.yaml": nsYAML} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// decodeAll decodes kubectl kustomize's output into typed objects.
func decodeAll(t *testing.T, rendered []byte) []runtime.Object {
	t.Helper()
	var objs []runtime.Object
	for _, doc := range strings.Split(string(rendered), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("rendered manifest: %v\n%s", err, doc)
		}
		objs = append(objs, obj)
	}
	return objs
}

// rendered is the objects of one render, by kind.
type rendered struct {
	namespaces  []*corev1.Namespace
	roles       []*rbacv1.Role
	bindings    []*rbacv1.RoleBinding
	configMaps  []*corev1.ConfigMap
	deployments map[string]*appsv1.Deployment
	services    map[string]*corev1.Service
	pdbs        []*policyv1.PodDisruptionBudget
	policies    []*admissionv1.ValidatingAdmissionPolicy
	vapBindings []*admissionv1.ValidatingAdmissionPolicyBinding
}

// sortObjects files the objects by kind, checking that every namespaced one is
// in ns and every cluster-scoped one in none.
func sortObjects(t *testing.T, objs []runtime.Object, ns string) *rendered {
	t.Helper()
	r := &rendered{deployments: map[string]*appsv1.Deployment{}, services: map[string]*corev1.Service{}}
	for _, obj := range objs {
		m, err := meta.Accessor(obj)
		if err != nil {
			t.Fatal(err)
		}
		namespaced := true
		switch o := obj.(type) {
		case *corev1.Namespace:
			r.namespaces, namespaced = append(r.namespaces, o), false
		case *corev1.ServiceAccount:
		case *rbacv1.Role:
			r.roles = append(r.roles, o)
		case *rbacv1.RoleBinding:
			r.bindings = append(r.bindings, o)
		case *corev1.ConfigMap:
			r.configMaps = append(r.configMaps, o)
		case *appsv1.Deployment:
			r.deployments[o.Name] = o
		case *corev1.Service:
			r.services[o.Name] = o
		case *policyv1.PodDisruptionBudget:
			r.pdbs = append(r.pdbs, o)
		case *admissionv1.ValidatingAdmissionPolicy:
			r.policies, namespaced = append(r.policies, o), false
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			r.vapBindings, namespaced = append(r.vapBindings, o), false
		default:
			t.Errorf("unexpected %T %s in the render", obj, m.GetName())
		}
		want := ""
		if namespaced {
			want = ns
		}
		if m.GetNamespace() != want {
			t.Errorf("%T %s is in namespace %q, want %q", obj, m.GetName(), m.GetNamespace(), want)
		}
	}
	return r
}

// checkInstall checks a render of tollgate and hello in ns: two leader-
// elected replicas with a PodDisruptionBudget, a config naming no
// namespace, and a Role naming what that config's targets use.
func checkInstall(t *testing.T, r *rendered, ns, tollgateImage, helloImage string) {
	t.Helper()
	tg, hello := r.deployments["tollgate"], r.deployments["hello"]
	if tg == nil || hello == nil || len(r.deployments) != 2 {
		t.Fatalf("Deployments %v, want tollgate and hello", slices.Sorted(maps.Keys(r.deployments)))
	}
	if n := ptr.Deref(tg.Spec.Replicas, 1); n != 2 {
		t.Errorf("tollgate replicas = %d, want 2", n)
	}
	if hello.Spec.Template.Labels[ScaledLabel] != "true" {
		t.Errorf("hello's pod template labels %v lack %s: \"true\", which the admission policy wants before tollgate sets a pod's deletion cost", hello.Spec.Template.Labels, ScaledLabel)
	}
	if hello.Spec.Replicas != nil {
		t.Errorf("hello sets replicas %d: a later apply would reset what tollgate set", *hello.Spec.Replicas)
	}
	pod := tg.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("tollgate has %d containers", len(pod.Containers))
	}
	ctr := pod.Containers[0]
	if ctr.Image != tollgateImage {
		t.Errorf("tollgate image %s, want %s", ctr.Image, tollgateImage)
	}
	if !slices.Contains(ctr.Args, "--kube-leader-elect") {
		t.Errorf("tollgate args %q lack --kube-leader-elect", ctr.Args)
	}
	fields := map[string]string{}
	for _, e := range ctr.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			fields[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	if fields["POD_NAME"] != "metadata.name" || fields["POD_NAMESPACE"] != "metadata.namespace" {
		t.Errorf("tollgate's downward API env %v, want POD_NAME and POD_NAMESPACE", fields)
	}
	if got := hello.Spec.Template.Spec.Containers[0].Image; got != helloImage {
		t.Errorf("hello image %s, want %s", got, helloImage)
	}
	if len(r.pdbs) != 1 {
		t.Fatalf("%d PodDisruptionBudgets, want 1", len(r.pdbs))
	}
	pdb := r.pdbs[0]
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 {
		t.Errorf("PodDisruptionBudget minAvailable %v, want 1", pdb.Spec.MinAvailable)
	}
	if !equality.Semantic.DeepEqual(pdb.Spec.Selector, tg.Spec.Selector) {
		t.Errorf("PodDisruptionBudget selects %v, tollgate's pods are %v", pdb.Spec.Selector, tg.Spec.Selector)
	}
	if s := r.services["tollgate"]; s == nil || !equality.Semantic.DeepEqual(s.Spec.Selector, tg.Spec.Selector.MatchLabels) {
		t.Errorf("tollgate's Service %v does not select its pods", s)
	}
	for _, b := range r.bindings {
		for _, s := range b.Subjects {
			if s.Kind == rbacv1.ServiceAccountKind && (s.Namespace != ns || s.Name != pod.ServiceAccountName) {
				t.Errorf("RoleBinding %s binds %s/%s, want %s/%s", b.Name, s.Namespace, s.Name, ns, pod.ServiceAccountName)
			}
		}
	}

	// The config: mounted from the generated ConfigMap, parsed as tollgate
	// parses it, its kubernetes targets in tollgate's own namespace.
	if len(r.configMaps) != 1 {
		t.Fatalf("%d ConfigMaps, want 1", len(r.configMaps))
	}
	cm := r.configMaps[0]
	if len(pod.Volumes) != 1 || pod.Volumes[0].ConfigMap == nil || pod.Volumes[0].ConfigMap.Name != cm.Name {
		t.Errorf("tollgate's volumes %v do not mount the ConfigMap %s", pod.Volumes, cm.Name)
	}
	cfg, err := config.Parse("tollgate.yaml", []byte(cm.Data["tollgate.yaml"]))
	if err != nil {
		t.Fatalf("the ConfigMap's tollgate.yaml: %v", err)
	}
	if len(r.roles) != 1 {
		t.Fatalf("%d Roles, want 1", len(r.roles))
	}
	allowed := func(group, resource, verb, name string) bool {
		for _, rule := range r.roles[0].Rules {
			if slices.Contains(rule.APIGroups, group) && slices.Contains(rule.Resources, resource) && slices.Contains(rule.Verbs, verb) &&
				(len(rule.ResourceNames) == 0 || slices.Contains(rule.ResourceNames, name)) {
				return true
			}
		}
		return false
	}
	targets := 0
	for name, a := range cfg.Autoscale {
		k := a.Kubernetes
		if k == nil {
			continue
		}
		targets++
		if k.Namespace != "" {
			t.Errorf("service %s names the namespace %s: the ConfigMap would not follow the overlay's", name, k.Namespace)
		}
		if r.deployments[k.Deployment] == nil || r.services[k.Service] == nil {
			t.Errorf("service %s scales %s behind %s, not in the render", name, k.Deployment, k.Service)
		}
		for _, c := range []struct{ group, resource, verb, name string }{
			{"apps", "deployments/scale", "get", k.Deployment},
			{"apps", "deployments/scale", "update", k.Deployment},
			{"apps", "deployments", "get", k.Deployment},
			{"coordination.k8s.io", "leases", "update", "tollgate-" + k.Deployment},
			{"coordination.k8s.io", "leases", "patch", "tollgate-" + k.Deployment + "-replicas"},
			{"coordination.k8s.io", "leases", "watch", "tollgate-" + k.Deployment + "-replicas"},
		} {
			if !allowed(c.group, c.resource, c.verb, c.name) {
				t.Errorf("the Role does not allow %s on %s %s (service %s)", c.verb, c.resource, c.name, name)
			}
		}
		if allowed("apps", "deployments/scale", "update", "not-"+k.Deployment) {
			t.Error("the Role lets tollgate scale any Deployment")
		}
		if allowed("coordination.k8s.io", "leases", "update", "another-controller") {
			t.Error("the Role lets tollgate update any Lease")
		}
	}
	if targets == 0 {
		t.Error("the config scales no Deployment")
	}
}

// checkPolicies checks the render holds policy.yaml's two policies and
// their bindings, cluster-scoped (sortObjects checked the namespace).
func checkPolicies(t *testing.T, r *rendered) {
	t.Helper()
	if len(r.policies) != 2 || len(r.vapBindings) != 2 {
		t.Fatalf("%d admission policies and %d bindings, want 2 and 2", len(r.policies), len(r.vapBindings))
	}
	names := map[string]bool{}
	for _, p := range r.policies {
		names[p.Name] = true
	}
	for _, b := range r.vapBindings {
		if !names[b.Spec.PolicyName] || !slices.Equal(b.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Deny}) {
			t.Errorf("binding %s: policy %s, actions %v", b.Name, b.Spec.PolicyName, b.Spec.ValidationActions)
		}
	}
}

// kubectl kustomize renders deploy/kubernetes in the namespace an overlay
// chooses, with its images: every namespaced object in it (the ConfigMap's
// config names none), tollgate at 2 leader-elected replicas with a
// PodDisruptionBudget, a Role naming what the config's targets use; the
// admission policies cluster-scoped, apart from every overlay's namespace.
func TestManifestsRender(t *testing.T) {
	ns := "tollgate-render-" + rand.String(5)
	out := runKubectl(t, nil, "kustomize", userOverlay(t, ns))
	if bytes.Contains(out, []byte("demo")) {
		t.Errorf("the render in namespace %s still names demo:\n%s", ns, out)
	}
	r := sortObjects(t, decodeAll(t, out), ns)
	checkInstall(t, r, ns, "registry.example/tollgate:v9", "registry.example/hello:v9")
	if len(r.namespaces) != 1 || r.namespaces[0].Name != ns {
		t.Errorf("Namespaces %v, want %s", r.namespaces, ns)
	}
	if len(r.policies) != 0 {
		t.Error("the overlay holds the cluster-scoped policies: kustomize would give them its namespace")
	}

	r = sortObjects(t, decodeAll(t, runKubectl(t, nil, "kustomize", manifests)), "demo")
	checkInstall(t, r, "demo", "tollgate:dev", "hello:dev")
	checkPolicies(t, r)
	if len(r.namespaces) != 1 || r.namespaces[0].Name != "demo" {
		t.Errorf("Namespaces %v, want demo", r.namespaces)
	}

	r = sortObjects(t, decodeAll(t, runKubectl(t, nil, "kustomize", filepath.Join(manifests, "policy"))), "")
	checkPolicies(t, r)
}

// A user's overlay, in a namespace of their choosing that exists, and the
// admission policies are accepted by the API server (--dry-run=server:
// validated, admitted, not stored).
func TestClusterManifestsApplyDryRun(t *testing.T) {
	_, client, ns := controlPlane(t, "tollgate-apply-")
	ctx := context.Background()

	overlay := runKubectl(t, nil, "kustomize", userOverlay(t, ns))
	policies := runKubectl(t, nil, "kustomize", filepath.Join(manifests, "policy"))
	for what, rendered := range map[string][]byte{"the overlay": overlay, "the policies": policies} {
		out := string(runKubectl(t, rendered, "apply", "--dry-run=server", "-f", "-"))
		t.Logf("%s:\n%s", what, out)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if n := bytes.Count(rendered, []byte("\n---\n")) + 1; len(lines) != n {
			t.Errorf("%s: %d objects applied, want %d", what, len(lines), n)
		}
		for _, l := range lines {
			if !strings.HasSuffix(l, "(server dry run)") {
				t.Errorf("%s: %q", what, l)
			}
		}
	}
	// Nothing was stored.
	if l, err := client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Errorf("Deployments after a dry run: %v, %v", l, err)
	}
}

// TestWarnsOfADeploymentWithoutTheScaledLabel: a Deployment whose pod
// template lacks tollgate.dev/scaled is warned of at start, since the
// admission policy then refuses tollgate its pods' deletion cost; one
// with it is not.
func TestWarnsOfADeploymentWithoutTheScaledLabel(t *testing.T) {
	for _, labelled := range []bool{false, true} {
		var buf bytes.Buffer
		e := newEnv(t, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&buf, nil)) })
		labels := map[string]string{"app": "hello"}
		if labelled {
			labels[ScaledLabel] = "true"
		}
		if _, err := e.client.AppsV1().Deployments(e.ns).Create(context.Background(), &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: e.ns},
			Spec:       appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.r.checkDeployment(context.Background())
		if warned := strings.Contains(buf.String(), "lacks the label "+ScaledLabel); warned == labelled {
			t.Errorf("pod template labels %v: warned %v\n%s", labels, warned, buf.String())
		}
	}
}
