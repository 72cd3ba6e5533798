package status

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/berth-dev/berth/internal/container"
)

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// at is t0 plus s seconds.
func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func mt(s int) metav1.Time { return metav1.NewTime(at(s)) }

// newPod is pod web/default with the named init and regular containers,
// each with image "img-<name>".
func newPod(policy v1.RestartPolicy, inits []string, apps ...string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1"},
		Spec:       v1.PodSpec{RestartPolicy: policy},
	}
	for _, n := range inits {
		p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: n, Image: "img-" + n})
	}
	for _, n := range apps {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: n, Image: "img-" + n})
	}
	return p
}

func readySandbox(ip string) container.SandboxStatus {
	return container.SandboxStatus{ID: "sb1", Ready: true, CreatedAt: at(0), IP: ip}
}

// ctr is a runtime container created at second created; running ones
// started then, exited ones ran for one second.
func ctr(name, id string, state container.State, created int, exit int32) container.ContainerStatus {
	c := container.ContainerStatus{ID: id, Name: name, SandboxID: "sb1", State: state,
		CreatedAt: at(created), ImageRef: "sha256:" + name, Image: "img-" + name}
	if state == container.StateRunning || state == container.StateExited {
		c.StartedAt = at(created)
	}
	if state == container.StateExited {
		c.FinishedAt = at(created + 1)
		c.ExitCode = exit
	}
	return c
}

func runtimeOf(sandboxes []container.SandboxStatus, ctrs ...container.ContainerStatus) *container.PodStatus {
	return &container.PodStatus{UID: "uid-1", Name: "web", Namespace: "default", Sandboxes: sandboxes, Containers: ctrs}
}

func input(pod *v1.Pod, rt *container.PodStatus) Input {
	return Input{Pod: pod, Runtime: rt, HostIP: "192.0.2.10", Now: at(100)}
}

func mustEqual(t *testing.T, what string, got, want any) {
	t.Helper()
	if !equality.Semantic.DeepEqual(got, want) {
		g, _ := yaml.Marshal(got)
		w, _ := yaml.Marshal(want)
		t.Errorf("%s:\n--- got\n%s--- want\n%s", what, g, w)
	}
}

func condition(t *testing.T, s v1.PodStatus, typ v1.PodConditionType) v1.PodCondition {
	t.Helper()
	c := findCondition(s.Conditions, typ)
	if c == nil {
		t.Fatalf("no %s condition in %+v", typ, s.Conditions)
	}
	return *c
}

func statusOf(t *testing.T, statuses []v1.ContainerStatus, name string) v1.ContainerStatus {
	t.Helper()
	st, ok := findStatus(statuses, name)
	if !ok {
		t.Fatalf("no status for container %q", name)
	}
	return *st
}
