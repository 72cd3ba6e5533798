package config

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// The kubelet's defaults for how the node is divided between the system and
// its pods.
const (
	DefaultCgroupRoot = "/"
	EnforcePods       = "pods"
)

// Resources is how berth divides the node's resources between the system
// and pods, and the cgroups it puts pods in.
type Resources struct {
	// CgroupsPerQOS puts pods in the kubepods / QoS / pod<UID> hierarchy
	// (cgroupsPerQOS, --cgroups-per-qos).
	CgroupsPerQOS bool
	// CgroupRoot is the cgroup that holds kubepods (cgroupRoot, --cgroup-root).
	CgroupRoot string
	// EnforceNodeAllocatable lists what is limited to its allocatable share;
	// berth supports "pods".
	EnforceNodeAllocatable []string
	// KubeReserved and SystemReserved are kept away from pods.
	KubeReserved, SystemReserved v1.ResourceList
	// QOSReservedMemoryPercent is qosReserved's memory percentage, nil when
	// unset: how much of the memory requested by higher QoS classes lower
	// classes may not use.
	QOSReservedMemoryPercent *int64
	// PodPidsLimit is the pids.max of every pod cgroup; -1 means unlimited.
	PodPidsLimit int64
}

// EnforcesPods reports whether the pods' cgroup is limited to allocatable.
func (r Resources) EnforcesPods() bool { return slices.Contains(r.EnforceNodeAllocatable, EnforcePods) }

func defaultResources() Resources {
	return Resources{
		CgroupsPerQOS:          true,
		CgroupRoot:             DefaultCgroupRoot,
		EnforceNodeAllocatable: []string{EnforcePods},
		PodPidsLimit:           -1,
	}
}

// applyResourcesFile copies the resource fields the file sets; a malformed
// value is an error naming its field.
func applyResourcesFile(r *Resources, kc *kubeletconfigv1beta1.KubeletConfiguration, set map[string]bool) []error {
	var errs []error
	if kc.CgroupsPerQOS != nil {
		r.CgroupsPerQOS = *kc.CgroupsPerQOS
	}
	if kc.CgroupRoot != "" {
		r.CgroupRoot = kc.CgroupRoot
	}
	if set["enforceNodeAllocatable"] {
		r.EnforceNodeAllocatable = kc.EnforceNodeAllocatable
	}
	if kc.PodPidsLimit != nil {
		r.PodPidsLimit = *kc.PodPidsLimit
	}
	var err error
	if r.KubeReserved, err = reservedList("kubeReserved", kc.KubeReserved); err != nil {
		errs = append(errs, err)
	}
	if r.SystemReserved, err = reservedList("systemReserved", kc.SystemReserved); err != nil {
		errs = append(errs, err)
	}
	for k, v := range kc.QOSReserved {
		if k != string(v1.ResourceMemory) {
			errs = append(errs, fmt.Errorf("qosReserved: %q: only memory can be reserved", k))
			continue
		}
		p, err := percent(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("qosReserved.memory: %w", err))
			continue
		}
		r.QOSReservedMemoryPercent = &p
	}
	return errs
}

// reservedList parses a kubeReserved / systemReserved map.
func reservedList(field string, m map[string]string) (v1.ResourceList, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := v1.ResourceList{}
	var errs []error
	for k, v := range m {
		switch v1.ResourceName(k) {
		case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage, "pid":
		default:
			errs = append(errs, fmt.Errorf("%s.%s: unknown resource (cpu, memory, ephemeral-storage or pid)", field, k))
			continue
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.%s: %q: %w", field, k, v, err))
			continue
		}
		if q.Sign() < 0 {
			errs = append(errs, fmt.Errorf("%s.%s: %q: must not be negative", field, k, v))
			continue
		}
		out[v1.ResourceName(k)] = q
	}
	return out, errors.Join(errs...)
}

func percent(v string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSuffix(v, "%"), 10, 64)
	if err != nil || !strings.HasSuffix(v, "%") {
		return 0, fmt.Errorf("%q: want a percentage such as 50%%", v)
	}
	if n < 0 || n > 100 {
		return 0, fmt.Errorf("%q: must be between 0%% and 100%%", v)
	}
	return n, nil
}

// validate reports the resource settings berth cannot honour.
func (r Resources) validate() []error {
	var errs []error
	if !path.IsAbs(r.CgroupRoot) {
		errs = append(errs, fmt.Errorf("cgroupRoot (--%s): %q: must be an absolute cgroup path", flagCgroupRoot, r.CgroupRoot))
	}
	for _, e := range r.EnforceNodeAllocatable {
		switch e {
		case EnforcePods, "none":
		case "system-reserved", "kube-reserved", "system-reserved-compressible", "kube-reserved-compressible":
			errs = append(errs, fmt.Errorf("enforceNodeAllocatable: %q: berth does not enforce reservations on system cgroups yet; use %q", e, EnforcePods))
		default:
			errs = append(errs, fmt.Errorf("enforceNodeAllocatable: %q: unknown (pods or none)", e))
		}
	}
	if r.EnforcesPods() && !r.CgroupsPerQOS {
		errs = append(errs, fmt.Errorf("enforceNodeAllocatable: %q needs cgroupsPerQOS (--%s)", EnforcePods, flagCgroupsPerQOS))
	}
	if r.PodPidsLimit < -1 || r.PodPidsLimit == 0 {
		errs = append(errs, fmt.Errorf("podPidsLimit (--%s): %d: must be positive, or -1 for no limit", flagPodMaxPids, r.PodPidsLimit))
	}
	return errs
}
