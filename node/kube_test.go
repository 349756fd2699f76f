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
