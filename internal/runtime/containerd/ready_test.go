package containerd

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

func TestCRIReady(t *testing.T) {
	cond := func(typ string, ok bool, reason, msg string) *runtimeapi.RuntimeCondition {
		return &runtimeapi.RuntimeCondition{Type: typ, Status: ok, Reason: reason, Message: msg}
	}
	for _, tc := range []struct {
		name   string
		status *runtimeapi.RuntimeStatus
		want   string // "" means ready
	}{
		{"both true", &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
			cond(runtimeapi.RuntimeReady, true, "", ""), cond(runtimeapi.NetworkReady, true, "", ""),
		}}, ""},
		{"network not ready, with containerd's reason", &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
			cond(runtimeapi.RuntimeReady, true, "", ""),
			cond(runtimeapi.NetworkReady, false, "NetworkPluginNotReady", "cni plugin not initialized"),
		}}, `CRI condition NetworkReady is false: reason "NetworkPluginNotReady", message "cni plugin not initialized"`},
		{"runtime not ready", &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
			cond(runtimeapi.RuntimeReady, false, "Starting", "recovering"), cond(runtimeapi.NetworkReady, true, "", ""),
		}}, `CRI condition RuntimeReady is false: reason "Starting", message "recovering"`},
		{"both false: both named", &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
			cond(runtimeapi.RuntimeReady, false, "A", "a"), cond(runtimeapi.NetworkReady, false, "B", "b"),
		}}, "CRI condition RuntimeReady is false: reason \"A\", message \"a\"\nCRI condition NetworkReady is false: reason \"B\", message \"b\""},
		{"a condition missing", &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
			cond(runtimeapi.RuntimeReady, true, "", ""),
		}}, "CRI status has no NetworkReady condition"},
		{"no status at all", nil, "CRI status has no RuntimeReady condition\nCRI status has no NetworkReady condition"},
		{"other conditions do not count", &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
			cond("ContainerdHasNoDeprecationWarnings", false, "", ""),
			cond(runtimeapi.RuntimeReady, true, "", ""), cond(runtimeapi.NetworkReady, true, "", ""),
		}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := criReady(tc.status, true)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("criReady = %q, want %q", got, tc.want)
			}
		})
	}
}

// fakeCRI answers CRI Status on a unix socket with the conditions it is
// set to.
type fakeCRI struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	mu         sync.Mutex
	conditions []*runtimeapi.RuntimeCondition
	err        error
}

func (f *fakeCRI) set(err error, conditions ...*runtimeapi.RuntimeCondition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err, f.conditions = err, conditions
}

func (f *fakeCRI) Status(context.Context, *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: f.conditions}}, nil
}

func serveFakeCRI(t *testing.T) (*fakeCRI, string) {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "berth-cri-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "cri.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeCRI{}
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, f)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return f, socket
}

// The wait for readiness ends when the CRI's conditions turn true, and
// when it times out, its error has the condition's reason and message.
func TestWaitReadyFollowsCRIConditions(t *testing.T) {
	cri, socket := serveFakeCRI(t)
	alive := func() bool { return true }
	ready := &runtimeapi.RuntimeCondition{Type: runtimeapi.RuntimeReady, Status: true}
	cni := &runtimeapi.RuntimeCondition{Type: runtimeapi.NetworkReady, Status: false,
		Reason: "NetworkPluginNotReady", Message: "cni plugin not initialized"}

	cri.set(errors.New("server is not initialized yet"))
	err := waitReady(context.Background(), clock.RealClock{}, 300*time.Millisecond, socket, alive, true)
	if err == nil || !strings.Contains(err.Error(), "server is not initialized yet") {
		t.Errorf("while CRI is initializing: %v", err)
	}
	cri.set(nil, ready, cni)
	err = waitReady(context.Background(), clock.RealClock{}, 300*time.Millisecond, socket, alive, true)
	if err == nil || !strings.Contains(err.Error(), `NetworkReady is false: reason "NetworkPluginNotReady", message "cni plugin not initialized"`) {
		t.Errorf("with the network not ready: %v", err)
	}
	if err := waitReady(context.Background(), clock.RealClock{}, time.Minute, socket, func() bool { return false }, true); !errors.Is(err, errExited) {
		t.Errorf("with containerd gone: %v, want errExited", err)
	}

	done := make(chan error, 1)
	go func() { done <- waitReady(context.Background(), clock.RealClock{}, time.Minute, socket, alive, true) }()
	cri.set(nil, ready, &runtimeapi.RuntimeCondition{Type: runtimeapi.NetworkReady, Status: true})
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("once ready: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("waitReady did not return a minute after the CRI became ready")
	}
}
