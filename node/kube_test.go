package node

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/pool/kube"
)

// A kubernetes service with a kubeconfig that does not exist is an error
// naming the kubeconfig; a config without kubernetes never loads one.
func TestKubeRunnersNeedAConfigOnlyWhenUsed(t *testing.T) {
	dir := t.TempDir()
	parse := func(yaml string) *config.Config {
		t.Helper()
		cfg, err := config.Parse(filepath.Join(dir, "c.yaml"), []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	log := slog.New(slog.DiscardHandler)
	missing := filepath.Join(dir, "no-such-kubeconfig")
	kr := newKubeRunners(KubeOptions{Kubeconfig: missing}, log, prometheus.NewRegistry())
	defer kr.Close()
	b := pools{log: log, kube: kr}

	specs, err := b.specs(parse("services:\n  - name: a\n    route: {path_prefix: /a/}\n    autoscale: {command: sh}\n"))
	if err != nil || len(specs) != 1 {
		t.Fatalf("process service: %v, %d specs", err, len(specs))
	}
	_, err = b.specs(parse("services:\n  - name: k\n    route: {path_prefix: /k/}\n    autoscale: {kubernetes: {namespace: n, deployment: d}}\n"))
	if err == nil || !strings.Contains(err.Error(), "service k") || !strings.Contains(err.Error(), "kubeconfig") {
		t.Fatalf("kubernetes service with a missing kubeconfig: %v", err)
	}
	if _, statErr := os.Stat(missing); statErr == nil {
		t.Fatal("the kubeconfig was created")
	}
}

// A kubernetes service naming no namespace takes tollgate's own; when
// nothing names one (no $POD_NAMESPACE, a kubeconfig whose context has
// none) the config is refused with kube.ErrNoNamespace, not sent to
// "default".
func TestKubeRunnersNamespaceNamedByNothing(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("POD_NAMESPACE", "")
	cfg, err := config.Parse(filepath.Join(dir, "c.yaml"), []byte("services:\n  - name: k\n    route: {path_prefix: /k/}\n    autoscale: {kubernetes: {deployment: d}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	kr := newKubeRunners(KubeOptions{Kubeconfig: kc}, log, prometheus.NewRegistry())
	defer kr.Close()
	b := pools{log: log, kube: kr}
	if _, err := b.specs(cfg); !errors.Is(err, kube.ErrNoNamespace) || !strings.Contains(err.Error(), "service k") {
		t.Fatalf("err = %v, want kube.ErrNoNamespace for service k", err)
	}
}

// A traffic block on Kubernetes is refused at file:line:col when
// tollgate runs as several replicas (--kube-leader-elect) and an entry's
// revision is bound to no Deployment (at the entry), or when the new
// revision's Service also selects an earlier revision's Deployment's
// pods (at the block); with a Service per Deployment, and with every
// revision bound under election, it is taken.
func TestKubeRunnersTrafficNeedsBindingsAndAServicePerDeployment(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: ctx, context: {cluster: c, user: u, namespace: apps}}]
current-context: ctx
`), 0o600); err != nil {
		t.Fatal(err)
	}
	parse := func(yaml string) *config.Config {
		t.Helper()
		cfg, err := config.Parse(filepath.Join(dir, "c.yaml"), []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	const v1 = "services:\n  - name: k\n    route: {path_prefix: /k/}\n    autoscale:\n      kubernetes: {deployment: hello-v1, service: hello}\n"
	split := func(kube string) string {
		return "services:\n  - name: k\n    route: {path_prefix: /k/}\n    autoscale:\n      kubernetes: " + kube + "\n" +
			"      traffic: [{revision: k-00001, percent: 90}, {latest_revision: true, percent: 10}]\n"
	}
	wantRefused := func(err error, msg string) {
		t.Helper()
		var fe *config.FieldError
		if !errors.As(err, &fe) || fe.Line != 6 || fe.Column != 28 || fe.Field != "services[0].autoscale.traffic" || !strings.Contains(fe.Msg, msg) {
			t.Fatalf("err = %v, want c.yaml:6:28: services[0].autoscale.traffic: ...%s...", err, msg)
		}
	}
	log := slog.New(slog.DiscardHandler)

	kr := newKubeRunners(KubeOptions{Kubeconfig: kc}, log, prometheus.NewRegistry())
	defer kr.Close()
	b := pools{log: log, kube: kr}
	if _, err := b.specs(parse(v1)); err != nil {
		t.Fatal(err)
	}
	_, err := b.specs(parse(split("{deployment: hello-v2, service: hello}")))
	wantRefused(err, "Service apps/hello also selects the pods of Deployment hello-v1")
	if _, err := b.specs(parse(split("{deployment: hello-v2}"))); err != nil {
		t.Fatalf("a split onto Deployment hello-v2 behind its own Service: %v", err)
	}

	shared := newKubeRunners(KubeOptions{Kubeconfig: kc, LeaderElect: true, Identity: "a"}, log, prometheus.NewRegistry())
	defer shared.Close()
	b = pools{log: log, kube: shared}
	_, err = b.specs(parse(split("{deployment: hello-v2}")))
	var fe *config.FieldError
	if !errors.As(err, &fe) || fe.Line != 6 || fe.Column != 28 || fe.Field != "services[0].autoscale.traffic[0].revision" ||
		!strings.Contains(fe.Msg, "with --kube-leader-elect (several tollgate replicas), revision k-00001 needs deployment:") {
		t.Fatalf("err = %v, want c.yaml:6:28: services[0].autoscale.traffic[0].revision: ...needs deployment:...", err)
	}
	if _, err := b.specs(parse(v1)); err != nil {
		t.Fatalf("no traffic with leader election: %v", err)
	}
	specs, err := b.specs(parse("services:\n  - name: k\n    route: {path_prefix: /k/}\n    autoscale:\n      kubernetes: {deployment: hello-v2}\n" +
		"      traffic: [{revision: k-00001, deployment: hello-v1, percent: 90}, {latest_revision: true, percent: 10}]\n"))
	if err != nil {
		t.Fatalf("bound traffic with leader election: %v", err)
	}
	if bd := specs[0].Bound; len(bd) != 1 || bd[0].Name != "k-00001" || bd[0].Latest || bd[0].Where != "Deployment apps/hello-v1" || bd[0].Runner == specs[0].Runner {
		t.Errorf("Bound = %+v, want k-00001 on its own runner, Deployment apps/hello-v1", bd)
	}
	if !strings.Contains(specs[0].TrafficFixed, "traffic is set in the config") {
		t.Errorf("TrafficFixed = %q", specs[0].TrafficFixed)
	}
}

// At start, a split on Kubernetes that names revisions without
// deployment: is logged as a warning saying to add it: the names began
// again at 00001 on the config's Deployment. One with only
// latest_revision, or binding its revisions, is not.
func TestKubeSplitNamingRevisionsWarnsAtStart(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: ctx, context: {cluster: c, user: u, namespace: apps}}]
current-context: ctx
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		traffic string
		warned  bool
	}{
		{"[{revision: k-00001, percent: 90}, {latest_revision: true, percent: 10}]", true},
		{"[{latest_revision: true, percent: 100, tag: current}]", false},
		{"[{revision: k-00001, deployment: hello-v1, percent: 90}, {latest_revision: true, percent: 10}]", false},
	} {
		cfg, err := config.Parse(filepath.Join(dir, "c.yaml"), []byte("services:\n  - name: k\n    route: {path_prefix: /k/}\n    autoscale:\n"+
			"      kubernetes: {deployment: hello-v2}\n      traffic: "+c.traffic+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		var logs strings.Builder
		log := slog.New(slog.NewTextHandler(&logs, nil))
		kr := newKubeRunners(KubeOptions{Kubeconfig: kc}, log, prometheus.NewRegistry())
		b := pools{log: log, kube: kr}
		if _, err := b.newPool(cfg, prometheus.NewRegistry()); err != nil {
			t.Fatal(err)
		}
		kr.Close()
		warned := strings.Contains(logs.String(), `level=WARN msg="traffic names revisions without deployment:, but revision names begin again at start`) &&
			strings.Contains(logs.String(), "add deployment: DEPLOYMENT to each such entry") &&
			strings.Contains(logs.String(), "deployment=hello-v2 named=[k-00001]")
		if warned != c.warned {
			t.Errorf("traffic %s: warned %v, want %v; log:\n%s", c.traffic, warned, c.warned, logs.String())
		}
	}
}
