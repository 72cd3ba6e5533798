package lifecycle

import (
	"errors"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/admission"
)

// recorder is a handler that notes its call and returns its result.
type recorder struct {
	name  string
	calls *[]string
	r     Result
}

func (h recorder) Admit(*PodAdmitAttributes) Result {
	*h.calls = append(*h.calls, h.name)
	return h.r
}

// failure is a failure handler that notes its call and returns r, err.
type failure struct {
	calls *[]string
	r     Result
	err   error
}

func (f failure) HandleAdmissionFailure(_ *PodAdmitAttributes, in Result) (Result, error) {
	*f.calls = append(*f.calls, "failure:"+in.Reason)
	return f.r, f.err
}

var (
	admit      = Result{Admit: true}
	outOfCPU   = Result{Reason: "OutOfcpu", Message: "cpu", Insufficient: []admission.InsufficientResource{{Resource: v1.ResourceCPU}}}
	nodeName   = Result{Reason: "NodeName", Failures: []admission.PredicateFailure{{Name: "NodeName"}}}
	forbidden  = Result{Reason: "SysctlForbidden", Message: "forbidden sysctl"}
	preempting = Result{Admit: true, Preemption: &admission.Preemption{}}
	podField   = Result{Reason: "UnsupportedPodField", Message: "spec.hostUsers"}
)

func TestPipelineAdmit(t *testing.T) {
	for _, tc := range []struct {
		name      string
		results   []Result // of handlers h0, h1, ...
		failure   *failure // nil: none
		want      Result
		wantCalls []string
	}{
		{name: "every handler runs, in order", results: []Result{admit, admit, admit},
			want: admit, wantCalls: []string{"h0", "h1", "h2"}},
		{name: "no handler admits", want: admit},
		{name: "the first rejection wins and ends the run", results: []Result{admit, forbidden, podField},
			want: forbidden, wantCalls: []string{"h0", "h1"}},
		{name: "a recoverable rejection stands without a failure handler", results: []Result{outOfCPU, admit},
			want: outOfCPU, wantCalls: []string{"h0"}},
		{name: "the failure handler turns a resource rejection into victims, and the handlers after run",
			results: []Result{admit, outOfCPU, admit}, failure: &failure{r: preempting},
			want: preempting, wantCalls: []string{"h0", "h1", "failure:OutOfcpu", "h2"}},
		{name: "a later handler still rejects a pod admitted by preempting",
			results: []Result{outOfCPU, podField}, failure: &failure{r: preempting},
			want: podField, wantCalls: []string{"h0", "failure:OutOfcpu", "h1"}},
		{name: "the failure handler lets a rejection stand", results: []Result{nodeName, admit}, failure: &failure{r: nodeName},
			want: nodeName, wantCalls: []string{"h0", "failure:NodeName"}},
		{name: "a rejection that is not for the fit never reaches the failure handler",
			results: []Result{forbidden}, failure: &failure{r: preempting},
			want: forbidden, wantCalls: []string{"h0"}},
		{name: "the failure handler's error rejects with UnexpectedAdmissionError",
			results: []Result{outOfCPU, admit}, failure: &failure{r: preempting, err: errors.New("preemption: no victims")},
			want: Result{Reason: admission.ReasonUnexpectedAdmissionError, Preemption: &admission.Preemption{},
				Message: "Unexpected error while attempting to recover from admission failure: preemption: no victims"},
			wantCalls: []string{"h0", "failure:OutOfcpu"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls []string
			var p Pipeline
			for i, r := range tc.results {
				p.Handlers = append(p.Handlers, recorder{name: "h" + string(rune('0'+i)), calls: &calls, r: r})
			}
			if tc.failure != nil {
				f := *tc.failure
				f.calls = &calls
				p.Failure = f
			}
			got := p.Admit(&PodAdmitAttributes{Pod: admission.NewPodInfo(&v1.Pod{})})
			if got.Admit != tc.want.Admit || got.Reason != tc.want.Reason || got.Message != tc.want.Message ||
				(got.Preemption == nil) != (tc.want.Preemption == nil) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if !slices.Equal(calls, tc.wantCalls) {
				t.Errorf("calls %v, want %v", calls, tc.wantCalls)
			}
		})
	}
}
