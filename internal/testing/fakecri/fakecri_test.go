package fakecri

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-dev/berth/internal/container"
)

// A pod's life through the fake: its status follows each call, faults fail
// the calls they name, and the log lists every call.
func TestPodLifecycle(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	r := New(clk)
	labels := map[string]string{container.LabelPodUID: "u1"}
	sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "ns", Uid: "u1"}, Labels: labels}
	sb, err := r.RunPodSandbox(ctx, sbCfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Image: &runtimeapi.ImageSpec{Image: "busybox"}, Labels: labels}
	if _, err := r.CreateContainer(ctx, sb, cfg, sbCfg); err == nil {
		t.Fatal("created a container of an image never pulled")
	}
	if _, err := r.PullImage(ctx, "busybox", sbCfg); err != nil {
		t.Fatal(err)
	}
	id, err := r.CreateContainer(ctx, sb, cfg, sbCfg)
	if err != nil {
		t.Fatal(err)
	}
	r.FailOnce("StartContainer "+id, errors.New("boom"))
	if err := r.StartContainer(ctx, id); err == nil || err.Error() != "boom" {
		t.Fatalf("start: %v, want boom", err)
	}
	if err := r.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	st, err := r.PodStatus(ctx, "u1")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Sandboxes) != 1 || !st.Sandboxes[0].Ready || st.Sandboxes[0].IP == "" || st.Name != "web" {
		t.Errorf("sandboxes %+v", st.Sandboxes)
	}
	if cs := st.LatestContainer("app"); cs == nil || cs.State != container.StateRunning {
		t.Errorf("app %+v, want running", cs)
	}
	r.Exit(id, 3, "Error")
	if err := r.StopPodSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	st, _ = r.PodStatus(ctx, "u1")
	if cs := st.LatestContainer("app"); cs.State != container.StateExited || cs.ExitCode != 3 || st.Sandboxes[0].Ready {
		t.Errorf("after the stop: %+v, %+v", cs, st.Sandboxes[0])
	}
	if err := r.RemovePodSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if len(r.Containers()) != 0 || len(r.Sandboxes()) != 0 {
		t.Errorf("left %v %v", r.Sandboxes(), r.Containers())
	}
	if err := r.StopContainer(ctx, id, 30); !isNotFound(err) {
		t.Errorf("stopping a removed container: %v, want NotFound", err)
	}
	want := []string{"StartContainer " + id, "StartContainer " + id}
	if got := r.CallsOf("StartContainer"); !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	if got := r.Succeeded("StartContainer"); !slices.Equal(got, []string{id}) {
		t.Errorf("succeeded %q", got)
	}
}

// A cancelled context fails a call before it changes anything.
func TestCancelledContext(t *testing.T) {
	r := New(nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{}); err == nil {
		t.Fatal("no error")
	}
	if len(r.Sandboxes()) != 0 {
		t.Error("a sandbox was made")
	}
}

func isNotFound(err error) bool { return status.Code(err) == codes.NotFound }
