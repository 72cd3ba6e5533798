package cm

import (
	"path"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/qos"
)

// The kubelet's cgroup names.
const (
	kubepodsCgroupName   = "kubepods"
	burstableCgroupName  = "burstable"
	besteffortCgroupName = "besteffort"
	podCgroupNamePrefix  = "pod"
)

// CgroupName is a cgroup as the list of its path components from the
// cgroup root, independent of the cgroup driver, as in the kubelet:
// {"kubepods", "burstable", "pod<uid>"}. The empty name is the root.
type CgroupName []string

// NewCgroupName appends components to parent, never sharing parent's
// backing array.
func NewCgroupName(parent CgroupName, components ...string) CgroupName {
	out := make(CgroupName, 0, len(parent)+len(components))
	return append(append(out, parent...), components...)
}

// ParseCgroupfs turns a cgroupfs path such as "/custom/root" into a name;
// "/" and "" are the root.
func ParseCgroupfs(p string) CgroupName {
	var out CgroupName
	for _, c := range strings.Split(p, "/") {
		if c != "" {
			out = append(out, c)
		}
	}
	return out
}

// ToCgroupfs is the name's path under a cgroupfs mount, such as
// "/kubepods/burstable/pod<uid>"; the root is "/". Cleaning a rooted path
// never climbs above "/", so no component can lead out of the mount.
func (n CgroupName) ToCgroupfs() string {
	return path.Clean("/" + strings.Join(n, "/"))
}

// KubepodsCgroup is the cgroup holding every pod: cgroupRoot ("/" or
// "/custom/root") + "kubepods".
func KubepodsCgroup(cgroupRoot string) CgroupName {
	return NewCgroupName(ParseCgroupfs(cgroupRoot), kubepodsCgroupName)
}

// QOSCgroup is the parent of the pod cgroups of one QoS class: kubepods
// itself for Guaranteed pods, which need no common limit, and the
// burstable and besteffort cgroups under it for the others.
func QOSCgroup(kubepods CgroupName, class v1.PodQOSClass) CgroupName {
	switch class {
	case v1.PodQOSBurstable:
		return NewCgroupName(kubepods, burstableCgroupName)
	case v1.PodQOSBestEffort:
		return NewCgroupName(kubepods, besteffortCgroupName)
	default:
		return NewCgroupName(kubepods)
	}
}

// PodCgroup is the pod's cgroup: "pod<UID>" under its QoS class's cgroup.
func PodCgroup(kubepods CgroupName, pod *v1.Pod) CgroupName {
	class := qos.PodQOSClass(withDefaultRequests(pod))
	return NewCgroupName(QOSCgroup(kubepods, class), podCgroupNamePrefix+string(pod.UID))
}

// PodUIDFromCgroup reads the pod UID out of a pod cgroup's base name,
// "pod<uid>", as found when listing a QoS cgroup; ok is false for any
// other name, such as the burstable and besteffort cgroups themselves.
func PodUIDFromCgroup(base string) (uid types.UID, ok bool) {
	rest, ok := strings.CutPrefix(base, podCgroupNamePrefix)
	if !ok || rest == "" {
		return "", false
	}
	return types.UID(rest), true
}
