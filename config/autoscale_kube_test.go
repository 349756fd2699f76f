package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseAutoscaleKubernetes(t *testing.T) {
	cfg, err := Parse(filepath.Join(t.TempDir(), "c.yaml"), []byte(`services:
  - name: hello
    route: {path_prefix: /hello/}
    autoscale:
      kubernetes: {namespace: apps, deployment: hello, port: 8080}
      readiness: {timeout: 5m}
      max_instances: 20
`))
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Autoscale["hello"]
	want := Kubernetes{Namespace: "apps", Deployment: "hello", Service: "hello", Port: 8080}
	if a.Kubernetes == nil || *a.Kubernetes != want {
		t.Fatalf("Kubernetes = %+v, want %+v", a.Kubernetes, want)
	}
	if a.Command != nil || a.Engine.MaxInstances != 20 {
		t.Errorf("autoscale = %+v", a)
	}
	// tollgate check prints what runs the instances: the Deployment, not
	// an empty command.
	var table strings.Builder
	if err := cfg.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if want := "autoscaled: Kubernetes Deployment apps/hello, Service hello, port 8080; 0–20 instances"; !strings.Contains(table.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, table.String())
	}
	b := *a
	b.Kubernetes = &Kubernetes{Namespace: "apps", Deployment: "hello", Service: "other", Port: 8080}
	if a.Template() == b.Template() {
		t.Error("another Service has the same Template: a reload would keep the old runner")
	}
}

// A kubernetes section may leave the namespace out: the runner resolves
// it to tollgate's own (kube.OwnNamespace), so a manifest's ConfigMap need
// not repeat the namespace it is applied in.
func TestParseAutoscaleKubernetesOwnNamespace(t *testing.T) {
	cfg, err := Parse(filepath.Join(t.TempDir(), "c.yaml"), []byte(`services:
  - name: hello
    route: {path_prefix: /hello/}
    autoscale:
      kubernetes: {deployment: hello}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := Kubernetes{Deployment: "hello", Service: "hello"}
	if a := cfg.Autoscale["hello"]; a.Kubernetes == nil || *a.Kubernetes != want {
		t.Fatalf("Kubernetes = %+v, want %+v", a.Kubernetes, want)
	}
	var table strings.Builder
	if err := cfg.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if want := "Kubernetes Deployment (tollgate's namespace)/hello, Service hello, its only port"; !strings.Contains(table.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, table.String())
	}
}

func TestParseAutoscaleKubernetesErrors(t *testing.T) {
	dir := t.TempDir()
	head := "services:\n  - name: a\n    route: {path_prefix: /a/}\n    autoscale: "
	cases := []struct{ yaml, want string }{
		{"{command: sh, kubernetes: {namespace: n, deployment: d}}",
			"c.yaml:4:42: services[0].autoscale.kubernetes: give either command (local processes) or kubernetes"},
		{"{kubernetes: {namespace: n}}",
			"c.yaml:4:29: services[0].autoscale.kubernetes.deployment: missing"},
		{"{kubernetes: {namespace: Bad_Name, deployment: d}}",
			"c.yaml:4:41: services[0].autoscale.kubernetes.namespace: \"Bad_Name\" is not a Kubernetes name"},
		{"{kubernetes: {namespace: n, deployment: d, port: 70000}}",
			"c.yaml:4:65: services[0].autoscale.kubernetes.port: 70000 not in [1, 65535]"},
		{"{kubernetes: {namespace: n, deployment: d, replicas: 3}}",
			"services[0].autoscale.kubernetes.replicas"},
		{"{kubernetes: {namespace: n, deployment: d}, env: {A: b}}",
			"c.yaml:4:29: services[0].autoscale.env: not used with kubernetes"},
		{"{kubernetes: [n, d]}",
			"services[0].autoscale.kubernetes"},
		{"{kubernetes: {namespace: n, deployment: d}, traffic: [{latest_revision: true, percent: 90}]}",
			"c.yaml:4:69: services[0].autoscale.traffic: percents sum to 90, not 100"},
		{"{kubernetes: {namespace: n, deployment: d}, traffic: [{revision: b-00001, percent: 100}]}",
			"c.yaml:4:81: services[0].autoscale.traffic[0].revision: \"b-00001\" is not a revision of service a"},
		{"{kubernetes: {namespace: n, deployment: d}, traffic: [{latest_revision: true, percent: 100, tag: Bad}]}",
			"c.yaml:4:113: services[0].autoscale.traffic[0].tag: \"Bad\" is not a tag"},
	}
	for _, c := range cases {
		_, err := Parse(filepath.Join(dir, "c.yaml"), []byte(head+c.yaml+"\n"))
		if err == nil || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%q: err = %v", c.yaml, err)
			continue
		}
		got := strings.ReplaceAll(err.Error(), dir+"/c.yaml", "c.yaml")
		if !strings.Contains(got, c.want) {
			t.Errorf("%q:\n got %s\nwant %s", c.yaml, got, c.want)
		}
	}
}

// On Kubernetes a traffic block splits a service over the revisions its
// Deployments made: the latest revision's Deployment is the one the
// section names, the others are named by revision as for processes.
func TestParseAutoscaleKubernetesTraffic(t *testing.T) {
	cfg, err := Parse(filepath.Join(t.TempDir(), "c.yaml"), []byte(`services:
  - name: hello
    route: {path_prefix: /hello/}
    autoscale:
      kubernetes: {namespace: apps, deployment: hello-v2}
      traffic:
        - {revision: hello-00001, percent: 90}
        - {latest_revision: true, percent: 10, tag: canary}
`))
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Autoscale["hello"]
	want := []TrafficTarget{
		{Revision: "hello-00001", Percent: 90, At: FieldError{Line: 7, Column: 22, Field: "services[0].autoscale.traffic[0].revision"}},
		{LatestRevision: true, Percent: 10, Tag: "canary", At: FieldError{Line: 8, Column: 11, Field: "services[0].autoscale.traffic[1]"}},
	}
	if len(a.Traffic) != len(want) {
		t.Fatalf("Traffic = %+v, want %+v", a.Traffic, want)
	}
	for i, e := range a.Traffic {
		e.At.File = ""
		if e != want[i] {
			t.Errorf("Traffic[%d] = %+v, want %+v", i, e, want[i])
		}
	}
	if a.Kubernetes == nil || a.Kubernetes.Deployment != "hello-v2" || a.Kubernetes.Service != "hello-v2" {
		t.Errorf("Kubernetes = %+v, want Deployment and Service hello-v2", a.Kubernetes)
	}
}
