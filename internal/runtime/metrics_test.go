package runtime

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestOperationType(t *testing.T) {
	// The operation_type values of the kubelet's instrumented CRI services.
	tests := []struct{ method, want string }{
		{"/runtime.v1.RuntimeService/Version", "version"},
		{"/runtime.v1.RuntimeService/Status", "status"},
		{"/runtime.v1.RuntimeService/RunPodSandbox", "run_podsandbox"},
		{"/runtime.v1.RuntimeService/StopPodSandbox", "stop_podsandbox"},
		{"/runtime.v1.RuntimeService/RemovePodSandbox", "remove_podsandbox"},
		{"/runtime.v1.RuntimeService/PodSandboxStatus", "podsandbox_status"},
		{"/runtime.v1.RuntimeService/ListPodSandbox", "list_podsandbox"},
		{"/runtime.v1.RuntimeService/PodSandboxStats", "podsandbox_stats"},
		{"/runtime.v1.RuntimeService/ListPodSandboxStats", "list_podsandbox_stats"},
		{"/runtime.v1.RuntimeService/ListPodSandboxMetrics", "list_podsandbox_metrics"},
		{"/runtime.v1.RuntimeService/CreateContainer", "create_container"},
		{"/runtime.v1.RuntimeService/StartContainer", "start_container"},
		{"/runtime.v1.RuntimeService/StopContainer", "stop_container"},
		{"/runtime.v1.RuntimeService/RemoveContainer", "remove_container"},
		{"/runtime.v1.RuntimeService/ListContainers", "list_containers"},
		{"/runtime.v1.RuntimeService/ContainerStatus", "container_status"},
		{"/runtime.v1.RuntimeService/UpdateContainerResources", "update_container"},
		{"/runtime.v1.RuntimeService/ReopenContainerLog", "reopen_container_log"},
		{"/runtime.v1.RuntimeService/ExecSync", "exec_sync"},
		{"/runtime.v1.RuntimeService/Exec", "exec"},
		{"/runtime.v1.RuntimeService/Attach", "attach"},
		{"/runtime.v1.RuntimeService/PortForward", "port_forward"},
		{"/runtime.v1.RuntimeService/ContainerStats", "container_stats"},
		{"/runtime.v1.RuntimeService/ListContainerStats", "list_container_stats"},
		{"/runtime.v1.RuntimeService/UpdateRuntimeConfig", "update_runtime_config"},
		{"/runtime.v1.RuntimeService/CheckpointContainer", "checkpoint_container"},
		{"/runtime.v1.RuntimeService/GetContainerEvents", "get_container_events"},
		{"/runtime.v1.RuntimeService/ListMetricDescriptors", "list_metric_descriptors"},
		{"/runtime.v1.RuntimeService/RuntimeConfig", "runtime_config"},
		{"/runtime.v1.ImageService/ListImages", "list_images"},
		{"/runtime.v1.ImageService/ImageStatus", "image_status"},
		{"/runtime.v1.ImageService/PullImage", "pull_image"},
		{"/runtime.v1.ImageService/RemoveImage", "remove_image"},
		{"/runtime.v1.ImageService/ImageFsInfo", "image_fs_info"},
		// Not a gRPC path at all: the name alone.
		{"Version2Info", "version2_info"},
	}
	for _, tt := range tests {
		if got := operationType(tt.method); got != tt.want {
			t.Errorf("operationType(%q) = %q, want %q", tt.method, got, tt.want)
		}
	}
}

func TestInterceptCountsTimesAndErrors(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	m, err := NewMetrics(nil, clk)
	if err != nil {
		t.Fatal(err)
	}
	call := func(method string, took time.Duration, fail error) {
		invoke := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
			clk.SetTime(clk.Now().Add(took))
			return fail
		}
		if err := m.intercept(context.Background(), method, nil, nil, nil, invoke); !errors.Is(err, fail) {
			t.Fatalf("intercept returned %v, want the call's own %v", err, fail)
		}
	}
	boom := errors.New("boom")
	call("/runtime.v1.RuntimeService/RunPodSandbox", 2*time.Second, nil)
	call("/runtime.v1.RuntimeService/RunPodSandbox", time.Second, boom)
	call("/runtime.v1.ImageService/PullImage", 30*time.Second, nil)

	for op, want := range map[string]float64{"run_podsandbox": 2, "pull_image": 1} {
		if got := counterValue(t, m.operations.WithLabelValues(op)); got != want {
			t.Errorf("operations{%s} = %v, want %v", op, got, want)
		}
	}
	if got := counterValue(t, m.errors.WithLabelValues("run_podsandbox")); got != 1 {
		t.Errorf("errors{run_podsandbox} = %v, want 1", got)
	}
	h := histogram(t, m.duration.WithLabelValues("run_podsandbox"))
	if h.GetSampleCount() != 2 || h.GetSampleSum() != 3 {
		t.Errorf("run_podsandbox durations: %d calls, %vs in all; want 2 calls, 3s", h.GetSampleCount(), h.GetSampleSum())
	}
	// The kubelet's buckets, and each call in the right one.
	wantBounds := prometheus.ExponentialBuckets(0.005, 2.5, 14)
	if len(h.Bucket) != len(wantBounds) {
		t.Fatalf("%d buckets, want the kubelet's %d", len(h.Bucket), len(wantBounds))
	}
	for i, b := range h.Bucket {
		want := uint64(0)
		switch {
		case b.GetUpperBound() >= 2:
			want = 2
		case b.GetUpperBound() >= 1:
			want = 1
		}
		if b.GetUpperBound() != wantBounds[i] || b.GetCumulativeCount() != want {
			t.Errorf("bucket le=%v holds %d, want le=%v holding %d", b.GetUpperBound(), b.GetCumulativeCount(), wantBounds[i], want)
		}
	}
}

// counterValue reads a counter or gauge.
func counterValue(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

func histogram(t *testing.T, o prometheus.Observer) *dto.Histogram {
	t.Helper()
	var m dto.Metric
	if err := o.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.Histogram
}

func TestNewMetricsRegisters(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := NewMetrics(reg, clocktesting.NewFakePassiveClock(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	m.operations.WithLabelValues("version").Inc()
	m.duration.WithLabelValues("version").Observe(0.01)
	m.errors.WithLabelValues("version").Inc()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]dto.MetricType{
		"kubelet_runtime_operations_total":            dto.MetricType_COUNTER,
		"kubelet_runtime_operations_duration_seconds": dto.MetricType_HISTOGRAM,
		"kubelet_runtime_operations_errors_total":     dto.MetricType_COUNTER,
	}
	for _, f := range families {
		if typ, ok := want[f.GetName()]; ok && typ == f.GetType() && f.Metric[0].Label[0].GetName() == "operation_type" {
			delete(want, f.GetName())
		}
	}
	if len(want) > 0 {
		t.Errorf("not registered (or not with that type and label): %v", want)
	}
	if _, err := NewMetrics(reg, clocktesting.NewFakePassiveClock(time.Now())); err == nil {
		t.Error("registering the metrics twice on one registry succeeded")
	}
}

// versionOnly is a CRI runtime that answers Version and nothing else.
type versionOnly struct {
	runtimeapi.UnimplementedRuntimeServiceServer
}

func (versionOnly) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: "fake"}, nil
}

func TestDialWithMetricsInstrumentsTheConnection(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "cri.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, versionOnly{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})

	m, err := NewMetrics(nil, clocktesting.NewFakePassiveClock(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Dial(ctx, "unix://"+sock, WithMetrics(m))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.ListContainers(ctx, nil); err == nil {
		t.Fatal("ListContainers on a runtime without it succeeded")
	}
	// A raw client on the same connection is counted too.
	if _, err := s.Runtime().Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name string
		c    *prometheus.CounterVec
		op   string
		want float64
	}{
		{"operations", m.operations, "version", 2}, // Dial's own check, then the raw call
		{"errors", m.errors, "version", 0},
		{"operations", m.operations, "list_containers", 1},
		{"errors", m.errors, "list_containers", 1},
	}
	for _, c := range checks {
		if got := counterValue(t, c.c.WithLabelValues(c.op)); got != c.want {
			t.Errorf("%s{%s} = %v, want %v", c.name, c.op, got, c.want)
		}
	}
}
