package node

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/config"
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
