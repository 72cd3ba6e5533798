package agent

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRunningContainerID(t *testing.T) {
	pod := v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "setup"}},
			Containers:     []v1.Container{{Name: "app"}, {Name: "log"}, {Name: "new"}, {Name: "crash"}},
		},
		Status: v1.PodStatus{
			InitContainerStatuses: []v1.ContainerStatus{{Name: "setup", ContainerID: "containerd://i1",
				State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: "Completed"}}}},
			ContainerStatuses: []v1.ContainerStatus{
				{Name: "app", ContainerID: "containerd://c1", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}},
				{Name: "log", ContainerID: "c2", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}},
				{Name: "crash", ContainerID: "containerd://c3",
					State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}},
			},
		},
	}
	other := pod
	other.Namespace = "kube-system"
	other.Status = v1.PodStatus{}
	// A pod being replaced is listed with its successor.
	old := *pod.DeepCopy()
	old.DeletionTimestamp = &metav1.Time{}
	old.Status.ContainerStatuses[0].ContainerID = "containerd://old"
	pods := []v1.Pod{other, pod, old}
	tests := []struct {
		name, namespace, pod, container string
		want                            string
		wantErr                         string // and fs.ErrNotExist
	}{
		{name: "running, in the pod that replaces another", namespace: "default", pod: "web", container: "app", want: "c1"},
		{name: "ID without a scheme", namespace: "default", pod: "web", container: "log", want: "c2"},
		{name: "unknown pod", namespace: "default", pod: "db", container: "app", wantErr: `pod "db" not found in namespace "default"`},
		{name: "other namespace", namespace: "prod", pod: "web", container: "app", wantErr: `pod "web" not found in namespace "prod"`},
		{name: "unknown container", namespace: "default", pod: "web", container: "db",
			wantErr: `container "db" not found in pod default/web; its containers are: setup, app, log, new, crash`},
		{name: "no status yet", namespace: "default", pod: "web", container: "new", wantErr: `container "new" in pod default/web is not created yet`},
		{name: "pod without statuses", namespace: "kube-system", pod: "web", container: "app", wantErr: "is not created yet"},
		{name: "waiting", namespace: "default", pod: "web", container: "crash",
			wantErr: `container "crash" in pod default/web is not running (waiting: CrashLoopBackOff)`},
		{name: "init container done", namespace: "default", pod: "web", container: "setup",
			wantErr: `is not running (terminated: Completed, exit code 0)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := runningContainerID(pods, tt.namespace, tt.pod, tt.container)
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q wrapping fs.ErrNotExist", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
