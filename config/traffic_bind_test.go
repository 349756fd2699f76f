package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseTrafficDeployment(t *testing.T) {
	dir := t.TempDir()
	cfg, err := Parse(filepath.Join(dir, "c.yaml"), []byte(`services:
  - name: hello
    route: {path_prefix: /hello/}
    autoscale:
      kubernetes: {namespace: apps, deployment: hello-v2}
      traffic:
        - {revision: hello-00001, deployment: hello-v1, percent: 90}
        - {revision: hello-00001, tag: stable}
        - {revision: hello-00002, deployment: hello-v2, tag: next}
        - {latest_revision: true, percent: 10, tag: canary}
`))
	if err != nil {
		t.Fatal(err)
	}
	tr := cfg.Autoscale["hello"].Traffic
	if len(tr) != 4 || tr[0].Deployment != "hello-v1" || tr[1].Deployment != "" || tr[2].Deployment != "hello-v2" {
		t.Fatalf("traffic: %+v", tr)
	}
	if at := tr[0].DeploymentAt; at.Line != 7 || at.Column != 47 || at.Field != "services[0].autoscale.traffic[0].deployment" {
		t.Errorf("traffic[0].deployment at %+v, want 7:47", at)
	}
	var table strings.Builder
	if err := cfg.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if want := "traffic: 90 % to hello-00001 (deployment hello-v1), 0 % to hello-00001 (tag stable), 0 % to hello-00002 (deployment hello-v2, tag next),"; !strings.Contains(table.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, table.String())
	}
}

func TestParseTrafficDeploymentErrors(t *testing.T) {
	dir := t.TempDir()
	kube := "services:\n  - name: a\n    route: {host: a.example}\n    autoscale:\n      kubernetes: {deployment: a-v3}\n      traffic:\n"
	proc := "services:\n  - name: a\n    route: {host: a.example}\n    autoscale:\n      command: sh\n      traffic:\n"
	cases := []struct{ head, traffic, want string }{
		{proc, "        - {revision: a-00001, deployment: a-v1, percent: 100}\n",
			"c.yaml:7:43: services[0].autoscale.traffic[0].deployment: binds revision a-00001 to a Kubernetes Deployment, but the service has no kubernetes: section"},
		{kube, "        - {latest_revision: true, deployment: a-v3, percent: 100}\n",
			"c.yaml:7:47: services[0].autoscale.traffic[0].deployment: not with latest_revision"},
		{kube, "        - {revision: a-00001, deployment: a-v1, percent: 50}\n        - {revision: a-00002, deployment: a-v1, percent: 50}\n",
			"c.yaml:8:43: services[0].autoscale.traffic[1].deployment: deployment a-v1 is already bound to revision a-00001 (services[0].autoscale.traffic[0].deployment)"},
		{kube, "        - {revision: a-00001, deployment: a-v1, percent: 50}\n        - {revision: a-00001, deployment: a-v2, percent: 50}\n",
			"c.yaml:8:43: services[0].autoscale.traffic[1].deployment: revision a-00001 is already bound to deployment a-v1"},
		{kube, "        - {revision: a-00002, deployment: a-v2, percent: 50}\n        - {revision: a-00001, deployment: a-v3, percent: 50}\n",
			"c.yaml:8:43: services[0].autoscale.traffic[1].deployment: deployment a-v3 is this section's kubernetes.deployment, which runs the latest revision, the newest: bind it to a revision numbered above every other bound one (a-00003 or later)"},
		{kube, "        - {revision: a-1, deployment: a-v1, percent: 100}\n",
			"c.yaml:7:39: services[0].autoscale.traffic[0].deployment: a bound revision is named as tollgate names revisions, a-00001, a-00002, ..., not \"a-1\""},
		{kube, "        - {revision: a-00000, deployment: a-v1, percent: 100}\n",
			"not \"a-00000\""},
		{kube, "        - {revision: a-00001, deployment: A_v1, percent: 100}\n",
			"c.yaml:7:43: services[0].autoscale.traffic[0].deployment: \"A_v1\" is not a Kubernetes name"},
		{kube, "        - {revision: a-00001, deployment: [a-v1], percent: 100}\n",
			"c.yaml:7:43: services[0].autoscale.traffic[0].deployment"},
	}
	for _, c := range cases {
		_, err := Parse(filepath.Join(dir, "c.yaml"), []byte(c.head+c.traffic))
		if err == nil || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%q: err = %v", c.traffic, err)
			continue
		}
		got := strings.ReplaceAll(err.Error(), dir+"/c.yaml", "c.yaml")
		if !strings.Contains(got, c.want) {
			t.Errorf("%q:\n got %s\nwant %s", c.traffic, got, c.want)
		}
	}
}

func TestRevisionNumber(t *testing.T) {
	for name, want := range map[string]int{"a-00001": 1, "a-00042": 42, "a-123456": 123456, "a-1": 0, "a-00000": 0, "b-00001": 0, "a-0001x": 0, "a--0001": 0, "a-+0001": 0} {
		if got := RevisionNumber("a", name); got != want {
			t.Errorf("RevisionNumber(a, %q) = %d, want %d", name, got, want)
		}
	}
}
