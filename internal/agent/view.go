package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/admission"
	"github.com/berth-dev/berth/internal/podsource"
	"github.com/berth-dev/berth/internal/status"
	"github.com/berth-dev/berth/internal/v1helper"
)

// podView is what the sync loop publishes of its state for the rest of
// berth to read: the desired pods with what admission decided about them,
// the pods the runtime has, whether the sources have been read, and the
// loop's heartbeat. The loop is its only writer; the garbage collectors,
// the APIs and the cluster's status sync read it, and none of them holds
// the loop. Each read sees one published snapshot whole, and a snapshot is
// never changed once published.
type podView struct {
	statuses *status.Manager
	clk      clock.PassiveClock
	// storeDir holds the manifests of `berth apply`: a broken one there is
	// shown as the API server's kind of pod.
	storeDir string
	snap     atomic.Pointer[podSnapshot]
	// heartbeat is when the loop last came back to wait for work (Unix
	// nanoseconds): the syncloop health check reads it.
	heartbeat atomic.Int64
}

// podSnapshot is the sync loop's state at one moment. Read-only.
type podSnapshot struct {
	// desired are copies of the loop's entries, by namespace/name; the pods
	// they point to are never changed.
	desired map[string]podEntry
	// admission is the decision about each desired pod, by namespace/name.
	admission   map[string]admission.Result
	manifestErr []podsource.ManifestError
	sourceReady bool
	// incomplete is set while a source (the API server) has not reported.
	incomplete bool
	// runtime is every pod the last relists saw.
	runtime map[types.UID]bool
}

func newPodView(statuses *status.Manager, clk clock.PassiveClock, rootDir string) *podView {
	v := &podView{statuses: statuses, clk: clk, storeDir: filepath.Join(rootDir, podsource.StoreDirName)}
	v.snap.Store(&podSnapshot{})
	return v
}

func (v *podView) load() *podSnapshot { return v.snap.Load() }

// wantedImages returns the images of every pod the manifests want, and
// whether the manifests have been read at all.
func (v *podView) wantedImages() ([]string, bool) {
	s := v.load()
	var out []string
	for _, e := range s.desired {
		out = append(out, podImages(e.pod)...)
	}
	return out, s.sourceReady
}

// podImages are the images pod runs or mounts: its containers' and its
// image volumes'.
func podImages(pod *v1.Pod) []string {
	var out []string
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			out = append(out, cs[i].Image)
		}
	}
	for i := range pod.Spec.Volumes {
		if img := pod.Spec.Volumes[i].Image; img != nil {
			out = append(out, img.Reference)
		}
	}
	return out
}

// pods returns every pod berth knows, with status: running pods from the
// status manager, plus rejected pods and invalid manifests as Failed pods.
func (v *podView) pods() []v1.Pod {
	out := v.statuses.Pods()
	seen := map[string]bool{}
	for i := range out {
		seen[key(&out[i])] = true
	}
	s := v.load()
	for k, e := range s.desired {
		if seen[k] {
			continue
		}
		switch {
		case e.rejected != nil && e.rejected.Reason == reasonPreempting:
			p := e.pod.DeepCopy()
			p.Status = preemptedStatus(v.clk.Now())
			out = append(out, *p)
		case len(e.preempting) > 0:
			p := e.pod.DeepCopy()
			p.Status = v1.PodStatus{Phase: v1.PodPending,
				Message: fmt.Sprintf("Waiting for the %d pods it preempts to stop", len(e.preempting))}
			out = append(out, *p)
		}
	}
	storeDir := v.storeDir + string(filepath.Separator)
	for _, me := range s.manifestErr {
		source := podsource.FileSource
		if strings.HasPrefix(me.Path, storeDir) {
			source = v1helper.ApiserverSource
		}
		out = append(out, manifestErrorPod(me, source))
	}
	sort.Slice(out, func(i, j int) bool { return key(&out[i]) < key(&out[j]) })
	return out
}

// ready reports whether the pod sources have been read: before that, berth
// cannot tell a pod it wants from one that is gone.
func (v *podView) ready() bool { return v.load().sourceReady }

// wants reports whether a desired pod with uid is admitted and not being
// deleted.
func (v *podView) wants(uid types.UID) bool {
	for _, e := range v.load().desired {
		if e.pod.UID == uid && e.runs() {
			return true
		}
	}
	return false
}

// admission returns the admission decision about the desired pod
// namespace/name.
func (v *podView) admission(namespace, name string) (admission.Result, bool) {
	r, ok := v.load().admission[namespace+"/"+name]
	return r, ok
}

// inRuntime reports whether the runtime still has anything of the pod.
func (v *podView) inRuntime(uid types.UID) bool { return v.load().runtime[uid] }

// staticPods returns the static pods berth wants, and whether the sources
// have been read.
func (v *podView) staticPods() ([]*v1.Pod, bool) {
	s := v.load()
	var out []*v1.Pod
	for _, e := range s.desired {
		if v1helper.IsStaticPod(e.pod) && e.pod.DeletionTimestamp == nil {
			out = append(out, e.pod)
		}
	}
	return out, s.sourceReady && !s.incomplete
}

// healthy is the syncloop health check.
func (v *podView) healthy(context.Context) error {
	return syncLoopHealth(v.heartbeat.Load(), v.clk.Now(), syncLoopStallThreshold)
}
