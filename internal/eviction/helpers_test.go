package eviction

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/internal/v1helper"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// bytes parses a quantity into a byte count for stats.
func bytes(s string) *uint64 {
	q := resource.MustParse(s)
	return ptr.To(uint64(q.Value()))
}

func quantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

// threshold builds a threshold from the kubelet's flag syntax's parts:
// value is a quantity or a percentage.
func threshold(t *testing.T, signal Signal, value string, grace time.Duration) Threshold {
	t.Helper()
	v, disabled, err := parseThresholdValue(value)
	if err != nil || disabled {
		t.Fatalf("threshold value %q: disabled=%v err=%v", value, disabled, err)
	}
	return Threshold{Signal: signal, Operator: OpLessThan, Value: v, GracePeriod: grace}
}

func withMinReclaim(t Threshold, value string) Threshold {
	v, _, _ := parseThresholdValue(value)
	t.MinReclaim = &v
	return t
}

func describe(ts []Threshold) string {
	var parts []string
	for _, t := range ts {
		s := t.String()
		if t.MinReclaim != nil {
			s += " min " + t.MinReclaim.String()
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// summary builds a node summary measured at the given time.
type summary struct{ s statsapi.Summary }

func newSummary(at time.Time) *summary {
	return &summary{s: statsapi.Summary{Node: statsapi.NodeStats{NodeName: "node", StartTime: metav1.NewTime(at)}}}
}

func (b *summary) at() metav1.Time { return b.s.Node.StartTime }

func (b *summary) memory(available, workingSet string) *summary {
	b.s.Node.Memory = &statsapi.MemoryStats{Time: b.at(), AvailableBytes: bytes(available), WorkingSetBytes: bytes(workingSet)}
	return b
}

func (b *summary) podsMemory(available, workingSet string) *summary {
	b.s.Node.SystemContainers = append(b.s.Node.SystemContainers, statsapi.ContainerStats{
		Name:   statsapi.SystemContainerPods,
		Memory: &statsapi.MemoryStats{Time: b.at(), AvailableBytes: bytes(available), WorkingSetBytes: bytes(workingSet)},
	})
	return b
}

func (b *summary) nodeFs(available, capacity string, inodesFree, inodes uint64) *summary {
	b.s.Node.Fs = &statsapi.FsStats{Time: b.at(), AvailableBytes: bytes(available), CapacityBytes: bytes(capacity), InodesFree: &inodesFree, Inodes: &inodes}
	return b
}

func (b *summary) imageFs(available, capacity string, inodesFree, inodes uint64) *summary {
	b.s.Node.Runtime = &statsapi.RuntimeStats{ImageFs: &statsapi.FsStats{Time: b.at(), AvailableBytes: bytes(available), CapacityBytes: bytes(capacity), InodesFree: &inodesFree, Inodes: &inodes}}
	return b
}

func (b *summary) pids(max, running int64) *summary {
	b.s.Node.Rlimit = &statsapi.RlimitStats{Time: b.at(), MaxPID: &max, NumOfRunningProcesses: &running}
	return b
}

func (b *summary) pod(ps statsapi.PodStats) *summary {
	b.s.Pods = append(b.s.Pods, ps)
	return b
}

func (b *summary) build() *statsapi.Summary {
	s := b.s
	return &s
}

// newPod is a pod from berth's local API: not static, so not critical.
func newPod(name string, opts ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "default", UID: types.UID("uid-" + name),
			Annotations: map[string]string{v1helper.ConfigSourceAnnotationKey: v1helper.ApiserverSource},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func priorityOf(v int32) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Spec.Priority = ptr.To(v) }
}

func staticPod(p *v1.Pod) {
	p.Annotations[v1helper.ConfigSourceAnnotationKey] = v1helper.FileSource
}

// container adds a container with the given requests ("memory=100Mi").
func container(name string, requests ...string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		c := v1.Container{Name: name}
		for _, r := range requests {
			k, v, _ := strings.Cut(r, "=")
			if c.Resources.Requests == nil {
				c.Resources.Requests = v1.ResourceList{}
			}
			c.Resources.Requests[v1.ResourceName(k)] = resource.MustParse(v)
		}
		p.Spec.Containers = append(p.Spec.Containers, c)
	}
}

func volume(name string, src v1.VolumeSource) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: name, VolumeSource: src}) }
}

// podStats builds a pod's stats; the pod's memory is its working set.
type podStatsBuilder struct{ s statsapi.PodStats }

func statsOf(p *v1.Pod) *podStatsBuilder {
	return &podStatsBuilder{s: statsapi.PodStats{PodRef: statsapi.PodReference{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID)}}}
}

func (b *podStatsBuilder) memory(workingSet string) *podStatsBuilder {
	b.s.Memory = &statsapi.MemoryStats{WorkingSetBytes: bytes(workingSet)}
	return b
}

func (b *podStatsBuilder) container(name, workingSet, rootfs, logs string, inodes uint64) *podStatsBuilder {
	c := statsapi.ContainerStats{Name: name}
	if workingSet != "" {
		c.Memory = &statsapi.MemoryStats{WorkingSetBytes: bytes(workingSet)}
	}
	if rootfs != "" {
		c.Rootfs = &statsapi.FsStats{UsedBytes: bytes(rootfs), InodesUsed: ptr.To(inodes)}
	}
	if logs != "" {
		c.Logs = &statsapi.FsStats{UsedBytes: bytes(logs), InodesUsed: ptr.To(uint64(1))}
	}
	b.s.Containers = append(b.s.Containers, c)
	return b
}

func (b *podStatsBuilder) volume(name, used string) *podStatsBuilder {
	b.s.VolumeStats = append(b.s.VolumeStats, statsapi.VolumeStats{Name: name, FsStats: statsapi.FsStats{UsedBytes: bytes(used), InodesUsed: ptr.To(uint64(1))}})
	return b
}

func (b *podStatsBuilder) processes(n uint64) *podStatsBuilder {
	b.s.ProcessStats = &statsapi.ProcessStats{ProcessCount: &n}
	return b
}

func (b *podStatsBuilder) build() statsapi.PodStats { return b.s }

// statsFor is a statsFunc over the given pod stats.
func statsFor(stats ...statsapi.PodStats) statsFunc { return podStatsByUID(stats) }

func names(pods []*v1.Pod) string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return strings.Join(out, ",")
}
