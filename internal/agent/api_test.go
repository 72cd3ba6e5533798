package agent

import (
	"errors"
	"io/fs"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestContainerToLog(t *testing.T) {
	terminated := func(id string) *v1.ContainerStateTerminated {
		return &v1.ContainerStateTerminated{ContainerID: id, ExitCode: 1}
	}
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	waiting := v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	tests := []struct {
		name     string
		cs       v1.ContainerStatus
		previous bool
		want     string // "" for fs.ErrNotExist
	}{
		{"running", v1.ContainerStatus{State: running, ContainerID: "containerd://c2",
			LastTerminationState: v1.ContainerState{Terminated: terminated("containerd://c1")}}, false, "c2"},
		{"running, previous", v1.ContainerStatus{State: running, ContainerID: "containerd://c2",
			LastTerminationState: v1.ContainerState{Terminated: terminated("containerd://c1")}}, true, "c1"},
		{"terminated", v1.ContainerStatus{State: v1.ContainerState{Terminated: terminated("containerd://c3")}, ContainerID: "containerd://c3"}, false, "c3"},
		// While a crash-looping container waits, its log is the last
		// instance's, and so is its previous log.
		{"waiting to restart", v1.ContainerStatus{State: waiting,
			LastTerminationState: v1.ContainerState{Terminated: terminated("containerd://c4")}}, false, "c4"},
		{"waiting to restart, previous", v1.ContainerStatus{State: waiting,
			LastTerminationState: v1.ContainerState{Terminated: terminated("containerd://c4")}}, true, "c4"},
		{"never started", v1.ContainerStatus{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}, false, ""},
		{"no previous", v1.ContainerStatus{State: running, ContainerID: "containerd://c5"}, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cs.Name = "app"
			got, err := containerToLog(&tt.cs, "web", tt.previous)
			if tt.want == "" {
				if !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("got %q, %v; want a not-exist error", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
