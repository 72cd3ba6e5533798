package runtime

import (
	"context"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func (f *fakeCRI) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	f.deadline(ctx)
	f.gotExec = req
	return &runtimeapi.ExecSyncResponse{Stdout: []byte("out"), ExitCode: 3}, nil
}

// ExecSync sends the command's timeout in whole seconds, rounded up, and
// waits for the runtime as long as the kubelet does: the timeout plus the
// runtime request timeout, so a probe on a slow runtime never gives up on a
// command the runtime is still running (and starts the next one beside it).
func TestExecSyncTimeouts(t *testing.T) {
	for _, tc := range []struct {
		timeout time.Duration
		secs    int64
	}{
		{time.Second, 1},
		{1500 * time.Millisecond, 2},
		{10 * time.Second, 10},
	} {
		f := &fakeCRI{}
		s := serveFake(t, f)
		stdout, _, code, err := s.ExecSync(context.Background(), "c1", []string{"cat", "/tmp/ready"}, tc.timeout)
		if err != nil || string(stdout) != "out" || code != 3 {
			t.Fatalf("timeout %v: stdout %q, code %d, err %v", tc.timeout, stdout, code, err)
		}
		if got := f.gotExec.GetTimeout(); got != tc.secs {
			t.Errorf("timeout %v: request's timeout %d s, want %d", tc.timeout, got, tc.secs)
		}
		want := DefaultCallTimeout + tc.timeout
		if f.gotDeadline > want || f.gotDeadline < want-10*time.Second {
			t.Errorf("timeout %v: call deadline in %v, want about %v", tc.timeout, f.gotDeadline, want)
		}
	}
}
