package kube

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func gpus(limit, request string) corev1.ResourceRequirements {
	rr := corev1.ResourceRequirements{Limits: corev1.ResourceList{}, Requests: corev1.ResourceList{}}
	if limit != "" {
		rr.Limits[GPUResource] = resource.MustParse(limit)
	}
	if request != "" {
		rr.Requests[GPUResource] = resource.MustParse(request)
	}
	return rr
}

// The GPUs of a pod: any container's or sidecar's nvidia.com/gpu limit,
// or request without one; not a finished init container's, nor another
// resource's.
func TestPodGPUs(t *testing.T) {
	always := ptr.To(corev1.ContainerRestartPolicyAlways)
	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
		want int
	}{
		{"none", corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}, 0},
		{"limit", corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: gpus("1", "")}}}, 1},
		{"request only", corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: gpus("", "2")}}}, 2},
		{"second container", corev1.PodSpec{Containers: []corev1.Container{{Name: "proxy"}, {Name: "model", Resources: gpus("1", "1")}}}, 1},
		{"sidecar", corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}, InitContainers: []corev1.Container{{Name: "s", RestartPolicy: always, Resources: gpus("1", "")}}}, 1},
		{"init container", corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}, InitContainers: []corev1.Container{{Name: "warm", Resources: gpus("1", "")}}}, 0},
		{"zero", corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: gpus("0", "")}}}, 0},
		{"more than a config may say", corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Resources: gpus("8", "")}, {Name: "b", Resources: gpus("8", "")}}}, 8},
		{"another resource", corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{"amd.com/gpu": resource.MustParse("1"), corev1.ResourceCPU: resource.MustParse("2")}}}}}, 0},
	} {
		if got := podGPUs(&tc.spec); got != tc.want {
			t.Errorf("%s: %d GPUs, want %d", tc.name, got, tc.want)
		}
	}
}

// The runner reads the Deployment's pod template when it starts and at
// every resync: a template asking for nvidia.com/gpu makes the pool's
// engine a GPU service's (pool.GPURunner), and one that stops asking
// ends it.
func TestRunnerReadsGPUsFromThePodTemplate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *Options) { o.Resync = 100 * time.Millisecond })
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: e.ns},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "proxy"}, {Name: "model", Resources: gpus("1", "1")},
		}}}},
	}
	ctx := context.Background()
	if _, err := e.client.AppsV1().Deployments(e.ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.run()
	eventually(t, "GPUs read from the template", func() bool { return e.r.GPUs() == 1 })
	d.Spec.Template.Spec.Containers[1].Resources = corev1.ResourceRequirements{}
	if _, err := e.client.AppsV1().Deployments(e.ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "no GPU once the template asks for none", func() bool { return e.r.GPUs() == 0 })
}
