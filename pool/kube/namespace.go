package kube

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
)

// ErrNoNamespace is wrapped by OwnNamespace's error when nothing names
// the namespace tollgate runs in.
var ErrNoNamespace = errors.New("no namespace: the config names none, and neither $POD_NAMESPACE, a pod's ServiceAccount nor the kubeconfig's current context gives one")

// serviceAccountNamespace is where a pod's ServiceAccount volume names the
// pod's namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// OwnNamespace is the namespace a kubernetes target without one lives in:
// tollgate's own, found as kubectl finds its default namespace. In order:
// $POD_NAMESPACE (the downward API's metadata.namespace); when tollgate
// uses the in-cluster config (no kubeconfig path and no $KUBECONFIG), the
// namespace of the pod's ServiceAccount; the namespace of the kubeconfig's
// current context. Unlike kubectl it does not fall back to "default":
// a target in a namespace nobody named is an error (ErrNoNamespace).
// source says which of them gave it, for the log.
func OwnNamespace(kubeconfig string) (ns, source string, err error) {
	return ownNamespace(kubeconfig, os.Getenv, serviceAccountNamespace)
}

func ownNamespace(kubeconfig string, getenv func(string) string, saFile string) (ns, source string, err error) {
	if ns := strings.TrimSpace(getenv("POD_NAMESPACE")); ns != "" {
		return ns, "$POD_NAMESPACE", nil
	}
	if kubeconfig == "" && getenv(clientcmd.RecommendedConfigPathEnvVar) == "" {
		b, err := os.ReadFile(saFile)
		switch {
		case err == nil && strings.TrimSpace(string(b)) != "":
			return strings.TrimSpace(string(b)), saFile, nil
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return "", "", fmt.Errorf("the pod's namespace: %w", err)
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := rules.Load()
	if err != nil {
		return "", "", fmt.Errorf("kubeconfig namespace: %w", err)
	}
	if c := cfg.Contexts[cfg.CurrentContext]; c != nil && c.Namespace != "" {
		return c.Namespace, "the kubeconfig's context " + cfg.CurrentContext, nil
	}
	return "", "", ErrNoNamespace
}
