package agent

import (
	"reflect"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/pleg"
)

func metricsSandbox(id, uid string, ready bool) *runtimeapi.PodSandbox {
	st := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	if ready {
		st = runtimeapi.PodSandboxState_SANDBOX_READY
	}
	labels := map[string]string{}
	if uid != "" {
		labels[container.LabelPodUID] = uid
	}
	return &runtimeapi.PodSandbox{Id: id, State: st, Labels: labels}
}

func metricsContainer(sandboxID string, st runtimeapi.ContainerState) *runtimeapi.Container {
	return &runtimeapi.Container{Id: "c-" + sandboxID, PodSandboxId: sandboxID, State: st}
}

func TestCountRuntime(t *testing.T) {
	const (
		created = runtimeapi.ContainerState_CONTAINER_CREATED
		running = runtimeapi.ContainerState_CONTAINER_RUNNING
		exited  = runtimeapi.ContainerState_CONTAINER_EXITED
		unknown = runtimeapi.ContainerState_CONTAINER_UNKNOWN
	)
	for _, tc := range []struct {
		name        string
		sandboxes   []*runtimeapi.PodSandbox
		ctrs        []*runtimeapi.Container
		wantPods    int
		wantByState map[string]int
	}{
		{name: "nothing", wantByState: map[string]int{}},
		{
			name:      "one pod per ready sandbox, every state counted",
			sandboxes: []*runtimeapi.PodSandbox{metricsSandbox("s1", "a", true), metricsSandbox("s2", "b", true)},
			ctrs: []*runtimeapi.Container{
				metricsContainer("s1", running), metricsContainer("s1", running), metricsContainer("s1", exited),
				metricsContainer("s2", created), metricsContainer("s2", unknown),
			},
			wantPods:    2,
			wantByState: map[string]int{"running": 2, "exited": 1, "created": 1, "unknown": 1},
		},
		{
			name: "a pod with an old dead sandbox and a ready one counts once",
			sandboxes: []*runtimeapi.PodSandbox{
				metricsSandbox("old", "a", false), metricsSandbox("new", "a", true),
			},
			ctrs:        []*runtimeapi.Container{metricsContainer("old", exited), metricsContainer("new", running)},
			wantPods:    1,
			wantByState: map[string]int{"running": 1, "exited": 1},
		},
		{
			name:        "a pod whose only sandbox is stopped does not run, its containers still count",
			sandboxes:   []*runtimeapi.PodSandbox{metricsSandbox("s1", "a", false)},
			ctrs:        []*runtimeapi.Container{metricsContainer("s1", exited)},
			wantByState: map[string]int{"exited": 1},
		},
		{
			name:        "sandboxes without a pod UID and foreign containers are not berth's",
			sandboxes:   []*runtimeapi.PodSandbox{metricsSandbox("s1", "", true)},
			ctrs:        []*runtimeapi.Container{metricsContainer("s1", running), metricsContainer("elsewhere", running)},
			wantByState: map[string]int{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := countRuntime(tc.sandboxes, tc.ctrs)
			if got.runningPods != tc.wantPods || !reflect.DeepEqual(got.containers, tc.wantByState) {
				t.Errorf("got %d pods, containers %v; want %d, %v", got.runningPods, got.containers, tc.wantPods, tc.wantByState)
			}
		})
	}
}

func TestRuntimeCollector(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	relist := pleg.Relist{}
	if err := registerRuntimeCollector(reg, func() pleg.Relist { return relist }); err != nil {
		t.Fatal(err)
	}
	read := func() map[string]float64 {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, f := range families {
			for _, m := range f.Metric {
				key := f.GetName()
				for _, l := range m.Label {
					key += "/" + l.GetValue()
				}
				out[key] = m.Gauge.GetValue()
			}
		}
		return out
	}
	zero := map[string]float64{
		"kubelet_running_pods": 0, "kubelet_running_containers/created": 0, "kubelet_running_containers/running": 0,
		"kubelet_running_containers/exited": 0, "kubelet_running_containers/unknown": 0,
	}
	if got := read(); !reflect.DeepEqual(got, zero) {
		t.Errorf("before the first relist: %v, want every series at 0", got)
	}

	relist = pleg.Relist{
		Sandboxes:  []*runtimeapi.PodSandbox{metricsSandbox("s1", "a", true)},
		Containers: []*runtimeapi.Container{metricsContainer("s1", runtimeapi.ContainerState_CONTAINER_RUNNING)},
	}
	want := map[string]float64{
		"kubelet_running_pods": 1, "kubelet_running_containers/created": 0, "kubelet_running_containers/running": 1,
		"kubelet_running_containers/exited": 0, "kubelet_running_containers/unknown": 0,
	}
	if got := read(); !reflect.DeepEqual(got, want) {
		t.Errorf("after a relist: %v, want %v", got, want)
	}

	// The pod is gone: its series read 0 again rather than keep their value.
	relist = pleg.Relist{}
	if got := read(); !reflect.DeepEqual(got, zero) {
		t.Errorf("after the pod left: %v, want every series at 0", got)
	}
}
