package podworker

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/container"
)

func TestWithContainers(t *testing.T) {
	t0 := time.Unix(100, 0)
	c := func(id string, at time.Time, s container.State) container.ContainerStatus {
		return container.ContainerStatus{ID: id, Name: "app", CreatedAt: at, State: s}
	}
	ids := func(st *container.PodStatus) []string {
		var out []string
		for _, cs := range st.Containers {
			out = append(out, cs.ID+":"+string(cs.State))
		}
		return out
	}
	running, exited := container.StateRunning, container.StateExited
	for _, tc := range []struct {
		name   string
		before []container.ContainerStatus
		read   []container.ContainerStatus
		gone   []string
		want   []string
	}{
		{"nothing changed", []container.ContainerStatus{c("a", t0, running)}, nil, nil,
			[]string{"a:" + string(running)}},
		{"a new instance goes first", []container.ContainerStatus{c("a", t0, exited)}, []container.ContainerStatus{c("b", t0.Add(time.Second), running)}, nil,
			[]string{"b:" + string(running), "a:" + string(exited)}},
		{"stopped and replaced at the same instant", []container.ContainerStatus{c("a", t0, running)},
			[]container.ContainerStatus{c("a", t0, exited), c("b", t0, running)}, nil,
			[]string{"b:" + string(running), "a:" + string(exited)}},
		{"two made in one sync, the later first", nil,
			[]container.ContainerStatus{c("init", t0, exited), c("app", t0, running)}, nil,
			[]string{"app:" + string(running), "init:" + string(exited)}},
		{"removed and gone", []container.ContainerStatus{c("b", t0.Add(time.Second), exited), c("a", t0, exited)},
			[]container.ContainerStatus{c("c", t0.Add(2*time.Second), running)}, []string{"a"},
			[]string{"c:" + string(running), "b:" + string(exited)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &container.PodStatus{UID: "u", Containers: tc.before}
			before := slices.Clone(tc.before)
			got := withContainers(st, tc.read, tc.gone)
			if !slices.Equal(ids(got), tc.want) {
				t.Errorf("containers %q, want %q", ids(got), tc.want)
			}
			if !slices.EqualFunc(st.Containers, before, func(a, b container.ContainerStatus) bool { return a.ID == b.ID && a.State == b.State }) {
				t.Error("the snapshot it was given changed")
			}
		})
	}
}

func TestWithSandboxes(t *testing.T) {
	t0 := time.Unix(100, 0)
	sb := func(id string, at time.Time, ready bool) container.SandboxStatus {
		return container.SandboxStatus{ID: id, CreatedAt: at, Ready: ready}
	}
	ids := func(sbs []container.SandboxStatus) []string {
		var out []string
		for _, s := range sbs {
			out = append(out, s.ID+":"+strconv.FormatBool(s.Ready))
		}
		return out
	}
	before := []container.SandboxStatus{sb("b", t0.Add(time.Second), true), sb("a", t0, false)}
	st := &container.PodStatus{UID: "u", Sandboxes: before}
	got := withSandboxes(st, []container.SandboxStatus{sb("b", t0.Add(time.Second), false), sb("c", t0.Add(2*time.Second), true)}, []string{"a"})
	if want := []string{"c:true", "b:false"}; !slices.Equal(ids(got.Sandboxes), want) {
		t.Errorf("sandboxes %q, want %q", ids(got.Sandboxes), want)
	}
	if want := []string{"b:true", "a:false"}; !slices.Equal(ids(st.Sandboxes), want) {
		t.Errorf("the snapshot it was given changed: %q", ids(st.Sandboxes))
	}
}
