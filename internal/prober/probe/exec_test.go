package probe

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/expansion"
)

// fakeExecer records the last call and answers as told.
type fakeExecer struct {
	stdout, stderr string
	code           int32
	err            error

	containerID string
	cmd         []string
	timeout     time.Duration
}

func (f *fakeExecer) ExecSync(_ context.Context, id string, cmd []string, timeout time.Duration) ([]byte, []byte, int32, error) {
	f.containerID, f.cmd, f.timeout = id, cmd, timeout
	return []byte(f.stdout), []byte(f.stderr), f.code, f.err
}

func execProbe(timeout int32, cmd ...string) *v1.Probe {
	return &v1.Probe{TimeoutSeconds: timeout, ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: cmd}}}
}

func TestExec(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fake   fakeExecer
		want   Result
		out    string
		errHas string
	}{
		{name: "exit 0", fake: fakeExecer{stdout: "ok\n"}, want: Success, out: "ok\n"},
		{name: "exit 1", fake: fakeExecer{stdout: "out ", stderr: "cat: can't open '/tmp/healthy'", code: 1}, want: Failure,
			out: "command [cat /tmp/healthy] exited with 1: out cat: can't open '/tmp/healthy'"},
		{name: "runtime timeout", fake: fakeExecer{err: status.Error(codes.DeadlineExceeded, "timeout 3s exceeded")}, want: Failure,
			out: `command "cat /tmp/healthy" timed out`},
		{name: "call deadline", fake: fakeExecer{err: fmt.Errorf("exec sync: %w", context.DeadlineExceeded)}, want: Failure,
			out: `command "cat /tmp/healthy" timed out`},
		{name: "runtime error", fake: fakeExecer{err: status.Error(codes.NotFound, "container not found")}, want: Unknown,
			errHas: "container not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := tc.fake
			r := NewRunner(&fake, testUserAgent)
			got := runProbe(r, execProbe(3, "cat", "/tmp/healthy"), nil)
			if got.res != tc.want || got.out != tc.out {
				t.Errorf("got %v, %q; want %v, %q", got.res, got.out, tc.want, tc.out)
			}
			if (tc.errHas == "") != (got.err == nil) || (got.err != nil && !strings.Contains(got.err.Error(), tc.errHas)) {
				t.Errorf("error %v, want one containing %q", got.err, tc.errHas)
			}
			if fake.containerID != "cid" || fake.timeout != 3*time.Second || !reflect.DeepEqual(fake.cmd, []string{"cat", "/tmp/healthy"}) {
				t.Errorf("ExecSync(%q, %q, %v), want (cid, [cat /tmp/healthy], 3s)", fake.containerID, fake.cmd, fake.timeout)
			}
		})
	}
}

func TestExecExpandsStaticEnv(t *testing.T) {
	fake := &fakeExecer{}
	r := NewRunner(fake, testUserAgent)
	c := &v1.Container{Name: "app", Env: []v1.EnvVar{
		{Name: "DIR", Value: "/srv"},
		{Name: "FILE", Value: "$(DIR)/ready"}, // values are not expanded themselves
		{Name: "POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "DIR", Value: "/data"}, // the later declaration wins
	}}
	got := runProbe(r, execProbe(1, "test", "-f", "$(DIR)/ok", "$(FILE)", "$(POD_IP)", "$(MISSING)", "$$(DIR)"), c)
	if got.res != Success || got.err != nil {
		t.Fatalf("got %v, %v", got.res, got.err)
	}
	want := []string{"test", "-f", "/data/ok", "$(DIR)/ready", "", "$(MISSING)", "$(DIR)"}
	if !reflect.DeepEqual(fake.cmd, want) {
		t.Errorf("ran %q, want %q", fake.cmd, want)
	}
}

func TestExecBadSpec(t *testing.T) {
	if got := runProbe(NewRunner(&fakeExecer{}, testUserAgent), execProbe(1), nil); got.res != Unknown || got.err == nil {
		t.Errorf("empty command: got %v, %v; want Unknown and an error", got.res, got.err)
	}
	if got := runProbe(NewRunner(nil, testUserAgent), execProbe(1, "true"), nil); got.res != Unknown || got.err == nil {
		t.Errorf("no Execer: got %v, %v; want Unknown and an error", got.res, got.err)
	}
}

func TestExpand(t *testing.T) {
	values := map[string]string{"A": "x", "EMPTY": ""}
	for in, want := range map[string]string{
		"":              "",
		"plain":         "plain",
		"$(A)":          "x",
		"a$(A)b$(A)c":   "axbxc",
		"$(EMPTY)!":     "!",
		"$(B)":          "$(B)",
		"$$(A)":         "$(A)",
		"$$$(A)":        "$x",
		"$$":            "$",
		"$":             "$",
		"a$":            "a$",
		"$A":            "$A",
		"$(A":           "$(A",
		"$($(A)":        "$($(A)",
		"$()":           "$()",
		"cost: $5":      "cost: $5",
		"$(A)$(A)$(A)":  "xxx",
		"((A))":         "((A))",
		"$(A) $$ $(A)$": "x $ x$",
	} {
		if got := expansion.Expand(in, expansion.MapLookup(values)); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCombinedOutputIsBounded(t *testing.T) {
	for _, tc := range []struct {
		stdout, stderr int
		want           string
	}{
		{stdout: 3, stderr: 2, want: "oooee"},
		{stdout: maxOutput - 1, stderr: 5, want: strings.Repeat("o", maxOutput-1) + "e"},
		{stdout: 2 * maxOutput, stderr: 5, want: strings.Repeat("o", maxOutput)},
		{stdout: 0, stderr: 2 * maxOutput, want: strings.Repeat("e", maxOutput)},
	} {
		got := combinedOutput([]byte(strings.Repeat("o", tc.stdout)), []byte(strings.Repeat("e", tc.stderr)))
		if got != tc.want {
			t.Errorf("stdout %d, stderr %d bytes: got %d bytes, want %d", tc.stdout, tc.stderr, len(got), len(tc.want))
		}
	}
}
