package eviction

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/berth-dev/berth/internal/v1helper"
)

// withContainer adds a container with the given ephemeral-storage limit
// ("" for none).
func withContainer(name, limit string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		c := v1.Container{Name: name}
		if limit != "" {
			c.Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: *quantity(limit)}
		}
		p.Spec.Containers = append(p.Spec.Containers, c)
	}
}

// withEmptyDir adds an emptyDir with the given sizeLimit ("" for none).
func withEmptyDir(name, medium, sizeLimit string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		ed := &v1.EmptyDirVolumeSource{Medium: v1.StorageMedium(medium)}
		if sizeLimit != "" {
			ed.SizeLimit = quantity(sizeLimit)
		}
		p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: name, VolumeSource: v1.VolumeSource{EmptyDir: ed}})
	}
}

// diskStats is what a pod uses: per container rootfs and logs ("" for
// unknown), per volume, and the pod's total ("" for unknown).
type diskStats struct {
	containers map[string][2]string
	volumes    map[string]string
	total      string
}

func (d diskStats) podStats(pod *v1.Pod) statsapi.PodStats {
	ps := statsapi.PodStats{PodRef: statsapi.PodReference{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID)}}
	fs := func(s string) *statsapi.FsStats {
		if s == "" {
			return nil
		}
		return &statsapi.FsStats{UsedBytes: bytes(s)}
	}
	for _, c := range pod.Spec.Containers {
		if u, ok := d.containers[c.Name]; ok {
			ps.Containers = append(ps.Containers, statsapi.ContainerStats{Name: c.Name, Rootfs: fs(u[0]), Logs: fs(u[1])})
		}
	}
	for _, v := range pod.Spec.Volumes {
		if u, ok := d.volumes[v.Name]; ok {
			ps.VolumeStats = append(ps.VolumeStats, statsapi.VolumeStats{Name: v.Name, FsStats: statsapi.FsStats{UsedBytes: bytes(u)}})
		}
	}
	ps.EphemeralStorage = fs(d.total)
	return ps
}

func TestCheckLocalStorage(t *testing.T) {
	for _, tc := range []struct {
		name        string
		pod         *v1.Pod
		stats       diskStats
		withImageFs bool
		// signal is "" when the pod may stay.
		signal  Signal
		message string
	}{
		// The kubelet's TestStorageLimitEvictions: its stats have no pod
		// total, so only the container's limit is over.
		{
			name:    "kubelet: rootfs above limit",
			pod:     newPod("rootfs-above-limits", withContainer("c", "1Gi")),
			stats:   diskStats{containers: map[string][2]string{"c": {"2Gi", "0"}}},
			signal:  SignalEphemeralContainerFsLimit,
			message: `Container c exceeded its local ephemeral storage limit "1Gi". `,
		},
		{
			name:    "kubelet: logs above limit",
			pod:     newPod("logsfs-above-limits", withContainer("c", "1Gi")),
			stats:   diskStats{containers: map[string][2]string{"c": {"0", "2Gi"}}},
			signal:  SignalEphemeralContainerFsLimit,
			message: `Container c exceeded its local ephemeral storage limit "1Gi". `,
		},
		{
			name:    "kubelet: local volume above limit",
			pod:     newPod("localvolume-above-limits", withContainer("c", ""), withEmptyDir("emptyDirVolume", "", "1Gi")),
			stats:   diskStats{containers: map[string][2]string{"c": {"0", "0"}}, volumes: map[string]string{"emptyDirVolume": "2Gi"}},
			signal:  SignalEmptyDirFsLimit,
			message: `Usage of EmptyDir volume "emptyDirVolume" exceeds the limit "1Gi". `,
		},
		// The kubelet's TestManagerWithLocalStorageCapacityIsolationOpen:
		// every part of the pod uses the same amount.
		{
			name:    "kubelet: empty-dir",
			pod:     newPod("empty-dir", withContainer("empty-dir", ""), withEmptyDir("local-volume", "", "900Mi")),
			stats:   diskStats{containers: map[string][2]string{"empty-dir": {"1800Mi", "1800Mi"}}, volumes: map[string]string{"local-volume": "1800Mi"}, total: "1800Mi"},
			signal:  SignalEmptyDirFsLimit,
			message: `Usage of EmptyDir volume "local-volume" exceeds the limit "900Mi". `,
		},
		{
			name: "kubelet: container-ephemeral-storage-limit",
			pod:  newPod("cesl", withContainer("cesl", "800Mi"), withEmptyDir("local-volume", "", "0")),
			// The pod's total equals its limit; the container's rootfs
			// and logs together exceed it.
			stats:   diskStats{containers: map[string][2]string{"cesl": {"800Mi", "800Mi"}}, volumes: map[string]string{"local-volume": "800Mi"}, total: "800Mi"},
			signal:  SignalEphemeralContainerFsLimit,
			message: `Container cesl exceeded its local ephemeral storage limit "800Mi". `,
		},
		{
			name:    "kubelet: pod-ephemeral-storage-limit",
			pod:     newPod("pesl", withContainer("pesl", "800Mi"), withEmptyDir("local-volume", "", "0")),
			stats:   diskStats{containers: map[string][2]string{"pesl": {"1600Mi", "1600Mi"}}, volumes: map[string]string{"local-volume": "1600Mi"}, total: "1600Mi"},
			signal:  SignalEphemeralPodFsLimit,
			message: "Pod ephemeral local storage usage exceeds the total limit of containers 800Mi. ",
		},
		// berth's own cases.
		{
			name:  "within every limit",
			pod:   newPod("modest", withContainer("c", "10Mi"), withEmptyDir("scratch", "", "10Mi")),
			stats: diskStats{containers: map[string][2]string{"c": {"2Mi", "4Ki"}}, volumes: map[string]string{"scratch": "2Mi"}, total: "4100Ki"},
		},
		{
			name:  "exactly at the limits is not over them",
			pod:   newPod("full", withContainer("c", "10Mi"), withEmptyDir("scratch", "", "10Mi")),
			stats: diskStats{containers: map[string][2]string{"c": {"6Mi", "4Mi"}}, volumes: map[string]string{"scratch": "10Mi"}, total: "10Mi"},
		},
		{
			name:  "no limits at all",
			pod:   newPod("free", withContainer("c", ""), withEmptyDir("scratch", "", "")),
			stats: diskStats{containers: map[string][2]string{"c": {"50Gi", "1Gi"}}, volumes: map[string]string{"scratch": "50Gi"}, total: "101Gi"},
		},
		{
			name: "the pod's limit is the sum of the containers' limits",
			pod:  newPod("two", withContainer("hog", "10Mi"), withContainer("idle", "1Gi")),
			// 30Mi is under the pod's 1Gi+10Mi but over the hog's own.
			stats:   diskStats{containers: map[string][2]string{"hog": {"30Mi", "0"}, "idle": {"1Mi", "0"}}, total: "31Mi"},
			signal:  SignalEphemeralContainerFsLimit,
			message: `Container hog exceeded its local ephemeral storage limit "10Mi". `,
		},
		{
			name: "a container without a limit counts towards a pod's limit",
			pod:  newPod("mixed", withContainer("limited", "10Mi"), withContainer("free", "")),
			stats: diskStats{containers: map[string][2]string{"limited": {"1Mi", "0"}, "free": {"30Mi", "0"}},
				total: "31Mi"},
			signal:  SignalEphemeralPodFsLimit,
			message: "Pod ephemeral local storage usage exceeds the total limit of containers 10Mi. ",
		},
		{
			name: "an emptyDir over its limit is named before the pod's total",
			pod:  newPod("dir", withContainer("c", "10Mi"), withEmptyDir("a", "", "10Mi"), withEmptyDir("b", "", "10Mi")),
			stats: diskStats{containers: map[string][2]string{"c": {"1Mi", "0"}},
				volumes: map[string]string{"a": "1Mi", "b": "30Mi"}, total: "32Mi"},
			signal:  SignalEmptyDirFsLimit,
			message: `Usage of EmptyDir volume "b" exceeds the limit "10Mi". `,
		},
		{
			name:  "an emptyDir not measured yet is not over",
			pod:   newPod("new", withContainer("c", ""), withEmptyDir("scratch", "", "10Mi")),
			stats: diskStats{containers: map[string][2]string{"c": {"1Mi", "0"}}},
		},
		{
			name:    "a medium Memory emptyDir is held to its sizeLimit too, as in the kubelet",
			pod:     newPod("tmpfs", withContainer("c", ""), withEmptyDir("shm", "Memory", "10Mi")),
			stats:   diskStats{containers: map[string][2]string{"c": {"1Mi", "0"}}, volumes: map[string]string{"shm": "11Mi"}, total: "1Mi"},
			signal:  SignalEmptyDirFsLimit,
			message: `Usage of EmptyDir volume "shm" exceeds the limit "10Mi". `,
		},
		{
			name:        "with an image filesystem the writable layer is not the container's",
			pod:         newPod("imagefs", withContainer("hog", "10Mi"), withContainer("idle", "1Gi")),
			stats:       diskStats{containers: map[string][2]string{"hog": {"30Mi", "1Mi"}, "idle": {"0", "0"}}, total: "31Mi"},
			withImageFs: true,
		},
		{
			name:        "with an image filesystem the logs still are",
			pod:         newPod("imagefs-logs", withContainer("hog", "10Mi"), withContainer("idle", "1Gi")),
			stats:       diskStats{containers: map[string][2]string{"hog": {"1Mi", "30Mi"}, "idle": {"0", "0"}}, total: "31Mi"},
			withImageFs: true,
			signal:      SignalEphemeralContainerFsLimit,
			message:     `Container hog exceeded its local ephemeral storage limit "10Mi". `,
		},
		{
			name:  "unknown usage is no usage",
			pod:   newPod("unknown", withContainer("c", "10Mi")),
			stats: diskStats{containers: map[string][2]string{"c": {"", ""}}},
		},
		{
			name: "init containers' limits count towards the pod's, as the scheduler sums them",
			pod: newPod("init", withContainer("c", "10Mi"), func(p *v1.Pod) {
				p.Spec.InitContainers = []v1.Container{{Name: "setup", Resources: v1.ResourceRequirements{
					Limits: v1.ResourceList{v1.ResourceEphemeralStorage: *quantity("100Mi")}}}}
			}),
			// Over the container's limit in logs, but the pod's limit is
			// max(100Mi, 10Mi): only the container is over.
			stats:   diskStats{containers: map[string][2]string{"c": {"0", "20Mi"}}, total: "20Mi"},
			signal:  SignalEphemeralContainerFsLimit,
			message: `Container c exceeded its local ephemeral storage limit "10Mi". `,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, over := checkLocalStorage(tc.pod, tc.stats.podStats(tc.pod), tc.withImageFs)
			if over != (tc.signal != "") || v.signal != tc.signal || v.message != tc.message {
				t.Errorf("got over=%v %q %q, want %q %q", over, v.signal, v.message, tc.signal, tc.message)
			}
		})
	}
}

// podDisk is a pod's stats as the node's summary reports them.
func podDisk(pod *v1.Pod, d diskStats) func() statsapi.PodStats {
	return func() statsapi.PodStats { return d.podStats(pod) }
}

func withLocalStorage(o *Options) { o.LocalStorageCapacityIsolation = true }

// A pass evicts every pod past its own limits, with the kubelet's message
// and no DisruptionTarget condition, though the node has plenty of disk
// and no threshold is met; its neighbours stay.
func TestLocalStorageEviction(t *testing.T) {
	e := newEnv(t, []Threshold{threshold(t, SignalNodeFsAvailable, "10%", 0)}, withLocalStorage)
	layerHog := newPod("layer-hog", withContainer("writer", "10Mi"), withContainer("idle", "1Gi"))
	dirHog := newPod("dir-hog", withContainer("writer", ""), withEmptyDir("scratch", "", "10Mi"))
	modest := newPod("modest", withContainer("writer", "10Mi"), withEmptyDir("scratch", "", "10Mi"))
	free := newPod("free", withContainer("writer", ""))
	avail := "90Gi"
	e.setNode(diskNode(&avail,
		podDisk(layerHog, diskStats{containers: map[string][2]string{"writer": {"30Mi", "0"}, "idle": {"0", "0"}}, total: "30Mi"}),
		podDisk(dirHog, diskStats{containers: map[string][2]string{"writer": {"0", "0"}}, volumes: map[string]string{"scratch": "30Mi"}, total: "30Mi"}),
		podDisk(modest, diskStats{containers: map[string][2]string{"writer": {"2Mi", "0"}}, volumes: map[string]string{"scratch": "2Mi"}, total: "4Mi"}),
		podDisk(free, diskStats{containers: map[string][2]string{"writer": {"30Gi", "0"}}, total: "30Gi"}),
	))
	e.setPods(layerHog, modest, dirHog, free)

	if p := e.sync(); p == nil || p.Name != "dir-hog" {
		t.Errorf("the pass returned %v, want the last pod it evicted, dir-hog", p)
	}
	if got := e.killed(); got != "layer-hog,dir-hog" {
		t.Fatalf("killed %q, want layer-hog,dir-hog", got)
	}
	wantMessages := []string{
		`Container writer exceeded its local ephemeral storage limit "10Mi". `,
		`Usage of EmptyDir volume "scratch" exceeds the limit "10Mi". `,
	}
	for i, k := range e.kills {
		st := k.status
		if k.grace != 1 || st.Phase != v1.PodFailed || st.Reason != "Evicted" || st.Message != wantMessages[i] || len(st.Conditions) != 0 {
			t.Errorf("%s: grace %d, status %+v; want grace 1, Failed, Evicted, %q, no condition", k.pod.Name, k.grace, st, wantMessages[i])
		}
	}
	wantEvents := []string{
		"layer-hog Warning Evicted: " + wantMessages[0],
		"dir-hog Warning Evicted: " + wantMessages[1],
	}
	if !slices.Equal(e.podEvents, wantEvents) {
		t.Errorf("pod events %q, want %q", e.podEvents, wantEvents)
	}
	if got := e.evictions(SignalEphemeralContainerFsLimit) + e.evictions(SignalEmptyDirFsLimit); got != 2 {
		t.Errorf("kubelet_evictions for the limits: %v, want 2", got)
	}
	if c := e.condition(v1.NodeDiskPressure); c != v1.ConditionFalse {
		t.Errorf("DiskPressure %s: a pod past its own limit is no node pressure", c)
	}
	if le := e.m.Status().LastEviction; le == nil || le.Name != "dir-hog" || le.Signal != SignalEmptyDirFsLimit {
		t.Errorf("last eviction %+v, want dir-hog for %s", le, SignalEmptyDirFsLimit)
	}

	// The next pass finds nobody past a limit.
	e.setPods(modest, free)
	if p := e.sync(); p != nil {
		t.Errorf("evicted %s", p.Name)
	}
}

// Without thresholds, a pass still measures the pods for their limits, as
// the kubelet's does with local storage isolation on.
func TestLocalStorageEvictionWithoutThresholds(t *testing.T) {
	e := newEnv(t, nil, withLocalStorage)
	hog := newPod("hog", withContainer("c", "10Mi"))
	avail := "90Gi"
	e.setNode(diskNode(&avail, podDisk(hog, diskStats{containers: map[string][2]string{"c": {"30Mi", "0"}}, total: "30Mi"})))
	e.setPods(hog)
	if p := e.sync(); p == nil || p.Name != "hog" {
		t.Fatalf("evicted %v, want hog", p)
	}
	if msg := e.kills[0].status.Message; msg != "Pod ephemeral local storage usage exceeds the total limit of containers 10Mi. " {
		t.Errorf("message %q", msg)
	}
}

// With isolation off, pods past their limits stay: only the node's
// thresholds are acted on.
func TestLocalStorageIsolationOff(t *testing.T) {
	e := newEnv(t, []Threshold{threshold(t, SignalNodeFsAvailable, "10%", 0)})
	hog := newPod("hog", withContainer("c", "10Mi"))
	avail := "90Gi"
	e.setNode(diskNode(&avail, podDisk(hog, diskStats{containers: map[string][2]string{"c": {"30Mi", "0"}}, total: "30Mi"})))
	e.setPods(hog)
	if p := e.sync(); p != nil {
		t.Errorf("evicted %s", p.Name)
	}
}

// A critical pod past its limits is spared, as under node pressure; a
// failed kill is reported and the other offenders still go.
func TestLocalStorageEvictionCriticalAndFailures(t *testing.T) {
	e := newEnv(t, []Threshold{threshold(t, SignalNodeFsAvailable, "10%", 0)}, withLocalStorage)
	static := newPod("static", withContainer("c", "10Mi"), func(p *v1.Pod) {
		p.Annotations[v1helper.ConfigSourceAnnotationKey] = v1helper.FileSource
	})
	a := newPod("a", withContainer("c", "10Mi"))
	b := newPod("b", withContainer("c", "10Mi"))
	over := diskStats{containers: map[string][2]string{"c": {"30Mi", "0"}}, total: "30Mi"}
	avail := "90Gi"
	e.setNode(diskNode(&avail, podDisk(static, over), podDisk(a, over), podDisk(b, over)))
	e.setPods(static, a, b)
	e.killErr = errors.New("runtime down")
	p, err := e.m.Synchronize(context.Background())
	if err == nil || !strings.Contains(err.Error(), "pod default/a failed to evict") || !strings.Contains(err.Error(), "pod default/b failed to evict") {
		t.Errorf("error %v, want both failures", err)
	}
	if p == nil || p.Name != "b" {
		t.Errorf("returned %v, want b", p)
	}
	if got := e.killed(); got != "a,b" {
		t.Errorf("killed %q, want a,b: never the static pod", got)
	}
}
