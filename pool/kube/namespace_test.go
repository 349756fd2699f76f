package kube

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A target without a namespace takes tollgate's own: $POD_NAMESPACE first,
// then (in-cluster config only) the ServiceAccount's namespace file, then
// the kubeconfig's current context; nothing naming one is ErrNoNamespace,
// not "default".
func TestOwnNamespace(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HOME", dir) // no ~/.kube/config
	t.Setenv("KUBECONFIG", "")
	write := func(name, body string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sa := write("namespace", "from-sa\n")
	noSA := filepath.Join(dir, "absent")
	kc := write("kubeconfig", `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: ctx, context: {cluster: c, user: u, namespace: from-kubeconfig}}]
current-context: ctx
`)
	kcNoNS := write("kubeconfig-nons", `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
`)
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cases := []struct {
		name       string
		kubeconfig string
		env        map[string]string
		saFile     string
		want       string
	}{
		{"downward API wins", kc, map[string]string{"POD_NAMESPACE": "from-env"}, sa, "from-env"},
		{"in-cluster: the ServiceAccount's", "", nil, sa, "from-sa"},
		{"a kubeconfig path: its context, not the pod's", kc, nil, sa, "from-kubeconfig"},
		{"$KUBECONFIG: its context, not the pod's", "", map[string]string{"KUBECONFIG": kc}, sa, "from-kubeconfig"},
		{"no ServiceAccount: the kubeconfig's", kc, nil, noSA, "from-kubeconfig"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if v := c.env["KUBECONFIG"]; v != "" {
				t.Setenv("KUBECONFIG", v) // clientcmd's loading rules read it themselves
			}
			got, source, err := ownNamespace(c.kubeconfig, env(c.env), c.saFile)
			if err != nil || got != c.want {
				t.Fatalf("namespace = %q (from %s), %v; want %q", got, source, err, c.want)
			}
			if source == "" {
				t.Error("no source named")
			}
		})
	}
	for _, k := range []string{kcNoNS, ""} {
		if got, _, err := ownNamespace(k, env(nil), noSA); !errors.Is(err, ErrNoNamespace) {
			t.Errorf("kubeconfig %q without a namespace: %q, %v; want ErrNoNamespace", k, got, err)
		}
	}
	if _, _, err := ownNamespace(filepath.Join(dir, "missing"), env(nil), noSA); err == nil || errors.Is(err, ErrNoNamespace) {
		t.Errorf("a missing kubeconfig: %v, want its load error", err)
	}
}
