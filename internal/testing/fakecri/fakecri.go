// Package fakecri is one stateful fake of the container runtime, for the
// tests of every berth component that talks to the CRI (the pod worker,
// image GC, container GC, stats, log rotation). It keeps sandboxes,
// containers and images in memory with the CRI's states and transitions,
// logs every call, and fails any call on demand.
//
// It implements the methods of *runtime.Service that those components
// declare in their narrow Runtime interfaces, with the same signatures, so
// a test hands a *Runtime wherever the real service goes. It must not
// import internal/runtime: that package's own tests, and those of packages
// it imports (logs), use the fake.
package fakecri

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// Runtime is the fake. The zero value is not usable: call New. It is safe
// for concurrent use.
type Runtime struct {
	mu         sync.Mutex
	clock      clock.PassiveClock
	seq        int
	sandboxes  map[string]*sandbox
	containers map[string]*ctr
	images     map[string]*runtimeapi.Image
	stats      []*runtimeapi.ContainerStats
	imageFs    *runtimeapi.ImageFsInfoResponse
	faults     map[string]*fault
	calls      []call
	hook       func(ctx context.Context, call string) error
	afterList  func(ctx context.Context, method string)
	exec       func(id string, cmd []string) (stdout, stderr []byte, code int32)
	// StopExitCode is the exit code StopContainer leaves (137: killed).
	stopExitCode int32
}

type sandbox struct {
	seq int
	pb  *runtimeapi.PodSandbox
	ip  string
	cfg *runtimeapi.PodSandboxConfig
}

type ctr struct {
	seq int
	pb  *runtimeapi.Container
	st  *runtimeapi.ContainerStatus
	cfg *runtimeapi.ContainerConfig
}

// call is one entry of the call log; failed when an injected fault, the
// hook or the context failed it.
type call struct {
	text   string
	failed bool
}

type fault struct {
	err   error
	times int // 0: every call
}

// New returns an empty runtime whose objects are stamped with clk's time
// (the real clock when nil).
func New(clk clock.PassiveClock) *Runtime {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Runtime{
		clock:        clk,
		sandboxes:    map[string]*sandbox{},
		containers:   map[string]*ctr{},
		images:       map[string]*runtimeapi.Image{},
		faults:       map[string]*fault{},
		stopExitCode: 137,
	}
}

// NotFound is the error the fake returns for an object it does not have:
// the CRI's gRPC NotFound, which runtime.IsNotFound recognizes.
func NotFound(what string) error { return status.Errorf(codes.NotFound, "%s not found", what) }

// Fail makes every later call matching key return err. key is a method's
// name ("RunPodSandbox"), a method and an object ID ("StopContainer c1"),
// or "*" for every call.
func (r *Runtime) Fail(key string, err error) { r.failN(key, err, 0) }

// FailOnce makes the next call matching key (as Fail) return err.
func (r *Runtime) FailOnce(key string, err error) { r.failN(key, err, 1) }

func (r *Runtime) failN(key string, err error, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		delete(r.faults, key)
		return
	}
	r.faults[key] = &fault{err: err, times: n}
}

// Heal removes every injected fault.
func (r *Runtime) Heal() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.faults)
}

// OnCall sets a hook run at the start of each call, outside the fake's
// lock, with the call as Calls logs it: a test blocks a call there, or
// changes the runtime under it. A non-nil error fails the call.
func (r *Runtime) OnCall(hook func(ctx context.Context, call string) error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hook = hook
}

// AfterList sets a hook run as each list (ListImages, ListPodSandboxes,
// ListContainers) returns, failed or not, outside the fake's lock: a test
// waits there for a component to have read the runtime.
func (r *Runtime) AfterList(hook func(ctx context.Context, method string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.afterList = hook
}

func (r *Runtime) listed(ctx context.Context, method string) {
	r.mu.Lock()
	hook := r.afterList
	r.mu.Unlock()
	if hook != nil {
		hook(ctx, method)
	}
}

// OnExec sets what ExecSync answers; by default a command succeeds
// silently.
func (r *Runtime) OnExec(f func(id string, cmd []string) (stdout, stderr []byte, code int32)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.exec = f
}

// Calls returns every call so far, in order: the method, then the object's
// ID where it has one, then for StopContainer the grace period.
func (r *Runtime) Calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.calls))
	for i, c := range r.calls {
		out[i] = c.text
	}
	return out
}

// Succeeded returns the object IDs of the calls to method that no fault
// failed, in order.
func (r *Runtime) Succeeded(method string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.calls {
		m, rest, _ := strings.Cut(c.text, " ")
		if m == method && !c.failed {
			id, _, _ := strings.Cut(rest, " ")
			out = append(out, id)
		}
	}
	return out
}

// CallsOf returns the calls to the methods named, in order.
func (r *Runtime) CallsOf(methods ...string) []string {
	var out []string
	for _, c := range r.Calls() {
		m, _, _ := strings.Cut(c, " ")
		if slices.Contains(methods, m) {
			out = append(out, c)
		}
	}
	return out
}

// ClearCalls forgets the calls so far.
func (r *Runtime) ClearCalls() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = nil
}

// begin logs a call, runs the hook, and returns the injected fault, if
// any. It takes and leaves the lock unlocked.
func (r *Runtime) begin(ctx context.Context, method, id string, extra ...string) error {
	text := method
	if id != "" {
		text += " " + id
	}
	for _, e := range extra {
		text += " " + e
	}
	r.mu.Lock()
	n := len(r.calls)
	r.calls = append(r.calls, call{text: text})
	hook := r.hook
	r.mu.Unlock()
	err := r.fault(ctx, hook, method, id, text)
	if err != nil {
		r.mu.Lock()
		r.calls[n].failed = true
		r.mu.Unlock()
	}
	return err
}

func (r *Runtime) fault(ctx context.Context, hook func(context.Context, string) error, method, id, text string) error {
	if hook != nil {
		if err := hook(ctx, text); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, key := range []string{method + " " + id, method, "*"} {
		f := r.faults[key]
		if f == nil {
			continue
		}
		if f.times > 0 {
			if f.times--; f.times == 0 {
				delete(r.faults, key)
			}
		}
		return f.err
	}
	return nil
}

// stamp returns the time and sequence number of a new object. Objects made
// at the same instant keep their order by the sequence.
func (r *Runtime) stamp() (int64, int) {
	r.seq++
	return r.clock.Now().UnixNano(), r.seq
}

func matches(labels, selector map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func newID(prefix string, seq int) string { return prefix + strconv.Itoa(seq) }

// SetStopExitCode sets the exit code StopContainer leaves (137 unless set).
func (r *Runtime) SetStopExitCode(code int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopExitCode = code
}

func failedPrecondition(msg string) error { return status.Error(codes.FailedPrecondition, msg) }

func cloneSandbox(pb *runtimeapi.PodSandbox) *runtimeapi.PodSandbox {
	return proto.Clone(pb).(*runtimeapi.PodSandbox)
}

func cloneContainer(pb *runtimeapi.Container) *runtimeapi.Container {
	return proto.Clone(pb).(*runtimeapi.Container)
}

func cloneStatus(pb *runtimeapi.ContainerStatus) *runtimeapi.ContainerStatus {
	return proto.Clone(pb).(*runtimeapi.ContainerStatus)
}
