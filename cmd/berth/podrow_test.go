package main

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var now = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) *metav1.Time {
	t := metav1.NewTime(now.Add(-d))
	return &t
}

func running() v1.ContainerState {
	return v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: *ago(time.Minute)}}
}

func waiting(reason string) v1.ContainerState {
	return v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason}}
}

func terminated(reason string, exitCode, signal int32) v1.ContainerState {
	return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: reason, ExitCode: exitCode, Signal: signal}}
}

// pod builds a pod with the named containers, started 5s ago.
func pod(containers ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: c})
	}
	p.Status.Phase = v1.PodRunning
	p.Status.StartTime = ago(5 * time.Second)
	return p
}

func status(name string, state v1.ContainerState, ready bool, restarts int32) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: state, Ready: ready, RestartCount: restarts}
}

func TestPodRowFor(t *testing.T) {
	tests := []struct {
		name string
		pod  func() *v1.Pod
		want podRow // Namespace and Name are always default/web
	}{
		{
			name: "running",
			pod: func() *v1.Pod {
				p := pod("app")
				p.Status.ContainerStatuses = []v1.ContainerStatus{status("app", running(), true, 0)}
				p.Status.PodIPs = []v1.PodIP{{IP: "10.88.0.5"}, {IP: "fd00::5"}}
				p.Status.PodIP = "10.88.0.5"
				p.Spec.NodeName = "node-1"
				return p
			},
			want: podRow{Ready: "1/1", Status: "Running", Restarts: "0", Age: "5s", IP: "10.88.0.5", Node: "node-1"},
		},
		{
			name: "one of two ready",
			pod: func() *v1.Pod {
				p := pod("app", "sidecar")
				p.Status.ContainerStatuses = []v1.ContainerStatus{status("app", running(), true, 0), status("sidecar", running(), false, 0)}
				return p
			},
			want: podRow{Ready: "1/2", Status: "Running", Restarts: "0", Age: "5s", IP: "<none>", Node: "<none>"},
		},
		{
			name: "crash loop with the time of the last restart",
			pod: func() *v1.Pod {
				p := pod("app")
				cs := status("app", waiting("CrashLoopBackOff"), false, 3)
				cs.LastTerminationState.Terminated = &v1.ContainerStateTerminated{ExitCode: 1, FinishedAt: *ago(2 * time.Minute)}
				p.Status.ContainerStatuses = []v1.ContainerStatus{cs}
				return p
			},
			want: podRow{Ready: "0/1", Status: "CrashLoopBackOff", Restarts: "3 (2m ago)", Age: "5s", IP: "<none>", Node: "<none>"},
		},
		{
			name: "restarts summed over containers",
			pod: func() *v1.Pod {
				p := pod("a", "b")
				p.Status.ContainerStatuses = []v1.ContainerStatus{status("a", running(), true, 2), status("b", running(), true, 5)}
				return p
			},
			want: podRow{Ready: "2/2", Status: "Running", Restarts: "7", Age: "5s", IP: "<none>", Node: "<none>"},
		},
		{
			name: "error",
			pod: func() *v1.Pod {
				p := pod("app")
				p.Status.Phase = v1.PodFailed
				p.Status.ContainerStatuses = []v1.ContainerStatus{status("app", terminated("Error", 1, 0), false, 0)}
				return p
			},
			want: podRow{Ready: "0/1", Status: "Error", Restarts: "0", Age: "5s", IP: "<none>", Node: "<none>"},
		},
		{
			name: "completed",
			pod: func() *v1.Pod {
				p := pod("job")
				p.Status.Phase = v1.PodSucceeded
				p.Status.ContainerStatuses = []v1.ContainerStatus{status("job", terminated("Completed", 0, 0), false, 0)}
				return p
			},
			want: podRow{Ready: "0/1", Status: "Completed", Restarts: "0", Age: "5s", IP: "<none>", Node: "<none>"},
		},
		{
			name: "completed next to a running ready container",
			pod: func() *v1.Pod {
				p := pod("main", "done")
				p.Status.ContainerStatuses = []v1.ContainerStatus{status("main", running(), true, 0), status("done", terminated("Completed", 0, 0), false, 0)}
				p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
				return p
			},
			want: podRow{Ready: "1/2", Status: "Running", Restarts: "0", Age: "5s", IP: "<none>", Node: "<none>"},
		},
		{
			name: "completed next to a running container, pod not ready",
			pod: func() *v1.Pod {
				p := pod("main", "done")
				p.Status.ContainerStatuses = []v1.ContainerStatus{status("main", running(), true, 0), status("done", terminated("Completed", 0, 0), false, 0)}
				p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}}
				return p
			},
			want: podRow{Ready: "1/2", Status: "NotReady", Restarts: "0", Age: "5s", IP: "<none>", Node: "<none>"},
		},
		{
			name: "exit code without a reason",
			pod: func() *v1.Pod {
				p := pod("app")
				p.Status.ContainerStatuses = []v1.ContainerStatus{status("app", terminated("", 3, 0), false, 0)}
				return p
			},
			want: podRow{Ready: "0/1", Status: "ExitCode:3", Restarts: "0", Age: "5s", IP: "<none>", Node: "<none>"},
		},
		{
			name: "signal without a reason",
			pod: func() *v1.Pod {
				p := pod("app")
				p.Status.ContainerStatuses = []v1.ContainerStatus{status("app", terminated("", 137, 9), false, 0)}
				return p
			},
			want: podRow{Ready: "0/1", Status: "Signal:9", Restarts: "0", Age: "5s", IP: "<none>", Node: "<none>"},
		},
		{
			name: "container creating",
			pod: func() *v1.Pod {
				p := pod("app")
				p.Status.Phase = v1.PodPending
				p.Status.ContainerStatuses = []v1.ContainerStatus{status("app", waiting("ContainerCreating"), false, 0)}
				return p
			},
			want: podRow{Ready: "0/1", Status: "ContainerCreating", Restarts: "0", Age: "5s", IP: "<none>", Node: "<none>"},
		},
		{
			name: "pending without statuses",
			pod: func() *v1.Pod {
				p := pod("app")
				p.Status.Phase = v1.PodPending
				return p
			},
			want: podRow{Ready: "0/1", Status: "Pending", Restarts: "0", Age: "5s", IP: "<none>", Node: "<none>"},
		},
		{
			name: "init container running",
			pod: func() *v1.Pod {
				p := pod("app")
				p.Status.Phase = v1.PodPending
				p.Spec.InitContainers = []v1.Container{{Name: "setup"}}
				p.Status.InitContainerStatuses = []v1.ContainerStatus{status("setup", running(), false, 0)}
				p.Status.ContainerStatuses = []v1.ContainerStatus{status("app", waiting("PodInitializing"), false, 0)}
				return p
			},
			want: podRow{Ready: "0/1", Status: "Init:0/1", Restarts: "0", Age: "5s", IP: "<none>", Node: "<none>"},
		},
		{
			name: "second init container waiting to start",
			pod: func() *v1.Pod {
				p := pod("app")
				p.Status.Phase = v1.PodPending
				p.Spec.InitContainers = []v1.Container{{Name: "one"}, {Name: "two"}}
				p.Status.InitContainerStatuses = []v1.ContainerStatus{
					status("one", terminated("Completed", 0, 0), false, 0),
					status("two", waiting("PodInitializing"), false, 0),
				}
				return p
			},
			want: podRow{Ready: "0/1", Status: "Init:1/2", Restarts: "0", Age: "5s", IP: "<none>", Node: "<none>"},
		},
		{
			name: "init container crash looping counts its restarts",
			pod: func() *v1.Pod {
				p := pod("app")
				p.Status.Phase = v1.PodPending
				p.Spec.InitContainers = []v1.Container{{Name: "setup"}}
				p.Status.InitContainerStatuses = []v1.ContainerStatus{status("setup", waiting("CrashLoopBackOff"), false, 4)}
				return p
			},
			want: podRow{Ready: "0/1", Status: "Init:CrashLoopBackOff", Restarts: "4", Age: "5s", IP: "<none>", Node: "<none>"},
		},
		{
			name: "init container failed",
			pod: func() *v1.Pod {
				p := pod("app")
				p.Status.Phase = v1.PodFailed
				p.Spec.InitContainers = []v1.Container{{Name: "setup"}}
				p.Status.InitContainerStatuses = []v1.ContainerStatus{status("setup", terminated("Error", 1, 0), false, 0)}
				return p
			},
			want: podRow{Ready: "0/1", Status: "Init:Error", Restarts: "0", Age: "5s", IP: "<none>", Node: "<none>"},
		},
		{
			name: "init container exit code",
			pod: func() *v1.Pod {
				p := pod("app")
				p.Spec.InitContainers = []v1.Container{{Name: "setup"}}
				p.Status.InitContainerStatuses = []v1.ContainerStatus{status("setup", terminated("", 2, 0), false, 0)}
				return p
			},
			want: podRow{Ready: "0/1", Status: "Init:ExitCode:2", Restarts: "0", Age: "5s", IP: "<none>", Node: "<none>"},
		},
		{
			name: "started sidecar counts among the containers",
			pod: func() *v1.Pod {
				p := pod("app")
				p.Spec.InitContainers = []v1.Container{{Name: "proxy", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways)}}
				sidecar := status("proxy", running(), true, 1)
				sidecar.Started = ptr.To(true)
				p.Status.InitContainerStatuses = []v1.ContainerStatus{sidecar}
				p.Status.ContainerStatuses = []v1.ContainerStatus{status("app", running(), true, 0)}
				p.Status.Conditions = []v1.PodCondition{{Type: v1.PodInitialized, Status: v1.ConditionTrue}}
				return p
			},
			want: podRow{Ready: "2/2", Status: "Running", Restarts: "1", Age: "5s", IP: "<none>", Node: "<none>"},
		},
		{
			name: "terminating",
			pod: func() *v1.Pod {
				p := pod("app")
				p.DeletionTimestamp = ago(time.Second)
				p.Status.ContainerStatuses = []v1.ContainerStatus{status("app", running(), true, 0)}
				return p
			},
			want: podRow{Ready: "1/1", Status: "Terminating", Restarts: "0", Age: "5s", IP: "<none>", Node: "<none>"},
		},
		{
			name: "a finished pod being deleted is not terminating",
			pod: func() *v1.Pod {
				p := pod("job")
				p.Status.Phase = v1.PodSucceeded
				p.DeletionTimestamp = ago(time.Second)
				p.Status.ContainerStatuses = []v1.ContainerStatus{status("job", terminated("Completed", 0, 0), false, 0)}
				return p
			},
			want: podRow{Ready: "0/1", Status: "Completed", Restarts: "0", Age: "5s", IP: "<none>", Node: "<none>"},
		},
		{
			name: "invalid manifest",
			pod: func() *v1.Pod {
				p := pod("app")
				p.Status.Phase = v1.PodFailed
				p.Status.Reason = "InvalidManifest"
				p.Status.Message = "spec.containers[0].image: Required value"
				return p
			},
			want: podRow{Ready: "0/1", Status: "InvalidManifest", Restarts: "0", Age: "5s", IP: "<none>", Node: "<none>"},
		},
		{
			name: "age in minutes, hours and days",
			pod: func() *v1.Pod {
				p := pod("app")
				p.Status.StartTime = ago(3 * time.Hour)
				return p
			},
			want: podRow{Ready: "0/1", Status: "Running", Restarts: "0", Age: "3h", IP: "<none>", Node: "<none>"},
		},
		{
			name: "age of days",
			pod: func() *v1.Pod {
				p := pod("app")
				p.Status.StartTime = ago(4 * 24 * time.Hour)
				return p
			},
			want: podRow{Ready: "0/1", Status: "Running", Restarts: "0", Age: "4d", IP: "<none>", Node: "<none>"},
		},
		{
			name: "age falls back to the creation time",
			pod: func() *v1.Pod {
				p := pod("app")
				p.Status.StartTime = nil
				p.CreationTimestamp = *ago(3 * time.Minute)
				return p
			},
			want: podRow{Ready: "0/1", Status: "Running", Restarts: "0", Age: "3m", IP: "<none>", Node: "<none>"},
		},
		{
			name: "no time at all",
			pod: func() *v1.Pod {
				p := pod("app")
				p.Status.StartTime = nil
				return p
			},
			want: podRow{Ready: "0/1", Status: "Running", Restarts: "0", Age: "<unknown>", IP: "<none>", Node: "<none>"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.Namespace, tt.want.Name = "default", "web"
			if got := podRowFor(tt.pod(), now); got != tt.want {
				t.Errorf("\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}
