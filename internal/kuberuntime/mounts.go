package kuberuntime

import (
	"fmt"
	"path"
	"path/filepath"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/expansion"
)

const etcHostsPath = "/etc/hosts"

// SubPath is a volumeMount's subPath resolved against its volume: the
// directory VolumePath/Path that is mounted into the container. The kubelet
// creates a missing subPath directory itself, without following symlinks out
// of the volume, before it creates the container; berth's caller does the
// same with volume.Manager.PrepareSubPath.
type SubPath struct {
	// MountIndex is the index in the container's volumeMounts.
	MountIndex int
	Volume     string
	VolumePath string
	// Path is relative to VolumePath, cleaned, never absolute and never
	// climbing out with "..".
	Path string
}

// SubPaths returns the subPaths the container mounts, with subPathExpr
// expanded against the container's environment, in volumeMounts order.
func SubPaths(pod *v1.Pod, c *v1.Container, opts ContainerOptions) ([]SubPath, error) {
	env, err := makeEnvironment(pod, c, opts)
	if err != nil {
		return nil, fmt.Errorf("container %q: %w", c.Name, err)
	}
	images := imageVolumeNames(pod)
	var out []SubPath
	for i := range c.VolumeMounts {
		vm := &c.VolumeMounts[i]
		if images[vm.Name] {
			continue // the runtime finds an image volume's subPath in the image
		}
		volumePath, sub, err := resolveMount(vm, opts.VolumePaths, env)
		if err != nil {
			return nil, fmt.Errorf("container %q: volumeMounts[%d] (%s): %w", c.Name, i, vm.Name, err)
		}
		if sub != "" {
			out = append(out, SubPath{MountIndex: i, Volume: vm.Name, VolumePath: volumePath, Path: sub})
		}
	}
	return out, nil
}

// makeMounts builds the container's mounts (kubelet makeMounts): one per
// volumeMount, then the managed /etc/hosts unless the container mounts its
// own, then the termination message file.
func makeMounts(pod *v1.Pod, c *v1.Container, opts ContainerOptions, env []envVar) ([]*runtimeapi.Mount, error) {
	forcedReadOnly := readOnlyVolumes(pod)
	images := imageVolumeNames(pod)
	mounts := make([]*runtimeapi.Mount, 0, len(c.VolumeMounts)+2)
	mountsHosts := false
	for i := range c.VolumeMounts {
		vm := &c.VolumeMounts[i]
		var m *runtimeapi.Mount
		var err error
		if images[vm.Name] {
			m, err = imageMount(vm, opts.ImageVolumes[vm.Name], env)
		} else {
			m, err = hostMount(vm, opts.VolumePaths, env)
		}
		if err != nil {
			return nil, fmt.Errorf("volumeMounts[%d] (%s): %w", i, vm.Name, err)
		}
		propagation, err := mountPropagation(vm.MountPropagation)
		if err != nil {
			return nil, fmt.Errorf("volumeMounts[%d] (%s): %w", i, vm.Name, err)
		}
		rro, err := recursiveReadOnly(vm, opts.RuntimeSupportsRecursiveReadOnly)
		if err != nil {
			return nil, fmt.Errorf("volumeMounts[%d] (%s): %w", i, vm.Name, err)
		}
		if !path.IsAbs(vm.MountPath) {
			return nil, fmt.Errorf("volumeMounts[%d] (%s): mountPath %q must be absolute", i, vm.Name, vm.MountPath)
		}
		mountsHosts = mountsHosts || path.Clean(vm.MountPath) == etcHostsPath
		m.ContainerPath = vm.MountPath
		m.Readonly = m.Readonly || vm.ReadOnly || forcedReadOnly[vm.Name]
		m.RecursiveReadOnly = rro
		m.Propagation = propagation
		mounts = append(mounts, m)
	}
	if opts.HostsFilePath != "" && !mountsHosts {
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: etcHostsPath, HostPath: opts.HostsFilePath})
	}
	if opts.TerminationMessageHostPath != "" && c.TerminationMessagePath != "" {
		mounts = append(mounts, &runtimeapi.Mount{
			ContainerPath: c.TerminationMessagePath,
			HostPath:      opts.TerminationMessageHostPath,
		})
	}
	return mounts, nil
}

// hostMount is the mount of a volume on the host: its directory, or the
// subPath within it.
func hostMount(vm *v1.VolumeMount, volumePaths map[string]string, env []envVar) (*runtimeapi.Mount, error) {
	volumePath, sub, err := resolveMount(vm, volumePaths, env)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.Mount{HostPath: filepath.Join(volumePath, sub)}, nil
}

// imageMount is the mount of an image volume (kubelet makeMounts with
// ImageVolume): the runtime mounts the pulled image, or the subPath within
// it (image_sub_path, which the runtime checks exists), always read-only,
// as the kubelet's image volume plugin reports ReadOnly. It has no host
// path.
func imageMount(vm *v1.VolumeMount, image *runtimeapi.ImageSpec, env []envVar) (*runtimeapi.Mount, error) {
	if image == nil || image.Image == "" {
		return nil, fmt.Errorf("image volume %q has not been pulled", vm.Name)
	}
	sub, err := resolveSubPath(vm, env)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.Mount{Image: image, ImageSubPath: sub, Readonly: true}, nil
}

// imageVolumeNames names the pod's image volumes.
func imageVolumeNames(pod *v1.Pod) map[string]bool {
	out := map[string]bool{}
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Image != nil {
			out[pod.Spec.Volumes[i].Name] = true
		}
	}
	return out
}

// readOnlyVolumes names the volumes every container mounts read-only
// whatever its volumeMount says, as the kubelet does (their plugins report
// ReadOnly attributes): those the node writes from the API, whose content
// is the object's and not the container's to change.
func readOnlyVolumes(pod *v1.Pod) map[string]bool {
	ro := map[string]bool{}
	for i := range pod.Spec.Volumes {
		src := &pod.Spec.Volumes[i].VolumeSource
		if src.ConfigMap != nil || src.Secret != nil || src.DownwardAPI != nil || src.Projected != nil {
			ro[pod.Spec.Volumes[i].Name] = true
		}
	}
	return ro
}

// resolveMount finds the mount's volume and its subPath (subPathExpr
// expanded), refusing any subPath that could leave the volume.
func resolveMount(vm *v1.VolumeMount, volumePaths map[string]string, env []envVar) (volumePath, subPath string, err error) {
	volumePath, ok := volumePaths[vm.Name]
	if !ok || volumePath == "" {
		return "", "", fmt.Errorf("volume %q is not among the pod's prepared volumes", vm.Name)
	}
	if subPath, err = resolveSubPath(vm, env); err != nil {
		return "", "", err
	}
	return volumePath, subPath, nil
}

// resolveSubPath is the mount's subPath, or its subPathExpr expanded,
// cleaned; "" for none. One that could leave the volume is refused.
func resolveSubPath(vm *v1.VolumeMount, env []envVar) (string, error) {
	sub, field := vm.SubPath, "subPath"
	if vm.SubPathExpr != "" {
		field = "subPathExpr"
		var err error
		if sub, err = expandSubPathExpr(vm.SubPathExpr, env); err != nil {
			return "", fmt.Errorf("subPathExpr %q: %w", vm.SubPathExpr, err)
		}
	}
	if sub == "" {
		return "", nil
	}
	if err := checkSubPath(sub); err != nil {
		return "", fmt.Errorf("%s %q: %w", field, sub, err)
	}
	return filepath.Clean(sub), nil
}

// checkSubPath keeps a subPath inside its volume lexically: relative, and
// without any ".." element (the kubelet's ValidatePathNoBacksteps).
func checkSubPath(sub string) error {
	if filepath.IsAbs(sub) {
		return fmt.Errorf("must not be an absolute path")
	}
	for _, elem := range strings.Split(filepath.ToSlash(sub), "/") {
		if elem == ".." {
			return fmt.Errorf("must not contain '..'")
		}
	}
	return nil
}

// expandSubPathExpr expands $(VAR) references in a subPathExpr; unlike in
// command and args, a reference to an unset or empty variable is an error,
// because it would silently mount the whole volume.
func expandSubPathExpr(expr string, env []envVar) (string, error) {
	values := envMap(env)
	missing := map[string]bool{}
	out := expansion.Expand(expr, func(name string) (string, bool) {
		v := values[name]
		if v == "" {
			missing[name] = true
		}
		return v, true
	})
	if len(missing) > 0 {
		names := make([]string, 0, len(missing))
		for n := range missing {
			names = append(names, n)
		}
		sort.Strings(names)
		return "", fmt.Errorf("missing value for %s", strings.Join(names, ", "))
	}
	return out, nil
}

func mountPropagation(mode *v1.MountPropagationMode) (runtimeapi.MountPropagation, error) {
	if mode == nil {
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE, nil
	}
	switch *mode {
	case v1.MountPropagationNone:
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE, nil
	case v1.MountPropagationHostToContainer:
		return runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER, nil
	case v1.MountPropagationBidirectional:
		return runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL, nil
	}
	return 0, fmt.Errorf("mountPropagation: invalid mode %q", *mode)
}

// recursiveReadOnly resolves the mount's recursiveReadOnly mode against what
// the runtime supports (kubelet resolveRecursiveReadOnly).
func recursiveReadOnly(vm *v1.VolumeMount, runtimeSupports bool) (bool, error) {
	if vm.RecursiveReadOnly == nil || *vm.RecursiveReadOnly == v1.RecursiveReadOnlyDisabled {
		return false, nil
	}
	if !vm.ReadOnly {
		return false, fmt.Errorf("recursiveReadOnly requires readOnly: true")
	}
	if vm.MountPropagation != nil && *vm.MountPropagation != v1.MountPropagationNone {
		return false, fmt.Errorf("recursiveReadOnly is incompatible with mountPropagation %q", *vm.MountPropagation)
	}
	switch *vm.RecursiveReadOnly {
	case v1.RecursiveReadOnlyIfPossible:
		return runtimeSupports, nil
	case v1.RecursiveReadOnlyEnabled:
		if !runtimeSupports {
			return false, fmt.Errorf("recursiveReadOnly: Enabled, but the runtime does not support recursive read-only mounts")
		}
		return true, nil
	}
	return false, fmt.Errorf("recursiveReadOnly: invalid mode %q", *vm.RecursiveReadOnly)
}
