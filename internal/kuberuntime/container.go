package kuberuntime

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"strconv"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/devicemanager"

	"github.com/berth-dev/berth/internal/cm"
	"github.com/berth-dev/berth/internal/expansion"
)

// ContainerOptions are the facts about the node, the pod's volumes and the
// running sandbox that a container's config depends on.
type ContainerOptions struct {
	// RestartCount is the container's attempt number, 0 for its first run.
	RestartCount int
	// Init marks an init container (sidecars included) in the annotations.
	Init bool
	// VolumePaths maps each pod volume to its host path
	// (volume.Manager.Setup).
	VolumePaths map[string]string
	// ImageVolumes maps each image volume the container mounts to the
	// image pulled for it (Image the ID, UserSpecifiedImage the volume's
	// reference), as the kubelet's getImageVolumes does.
	ImageVolumes map[string]*runtimeapi.ImageSpec
	// TerminationMessageHostPath is the host file mounted at the container's
	// terminationMessagePath; empty mounts none.
	TerminationMessageHostPath string
	// HostsFilePath is the pod's managed hosts file (see HostsFile), mounted
	// at /etc/hosts unless the container mounts something there itself;
	// empty mounts none and leaves /etc/hosts to the runtime.
	HostsFilePath string

	// PodIP and PodIPs are the sandbox's addresses, HostIP and HostIPs the
	// node's, for the downward API (status.podIP(s), status.hostIP(s)).
	PodIP   string
	PodIPs  []string
	HostIP  string
	HostIPs []string
	// NodeName answers spec.nodeName when the pod does not set it.
	NodeName string
	// EnvObjects are the configMaps and secrets the container's env
	// refers to (EnvReferences); nil on a node without an API server,
	// where such references are errors.
	EnvObjects *EnvObjects
	// ServiceEnv are the service variables of the pod (package envvars),
	// the lowest layer of the environment: the container's envFrom and
	// env replace any of them. A later duplicate replaces an earlier one.
	// Nil on a node without an API server.
	ServiceEnv []v1.EnvVar

	// ImageRef is the image ID to run, as ImageStatus or PullImage returned
	// it; empty runs the container's image by name.
	ImageRef string
	// ImageUID and ImageUser are the user the image runs as (ImageStatus uid,
	// username), for runAsNonRoot.
	ImageUID  *int64
	ImageUser string

	// NodeAllocatable answers resourceFieldRef limits the container leaves
	// unset; NodeMemoryCapacity (bytes) scales the OOM score of Burstable
	// containers.
	NodeAllocatable    v1.ResourceList
	NodeMemoryCapacity int64
	// Memory is the node's memory policy: memory.oom.group, swap and the
	// huge page sizes the container gets limits for.
	Memory cm.MemoryPolicy

	// SeccompProfileRoot is the absolute directory Localhost seccomp
	// profiles are relative to, SeccompProfileRoot(root dir) as for the
	// kubelet; empty refuses every Localhost profile. SeccompDefault runs
	// containers that ask for no profile with RuntimeDefault instead of
	// Unconfined (the kubelet's seccompDefault).
	SeccompProfileRoot string
	SeccompDefault     bool
	// RuntimeSupportsRecursiveReadOnly tells whether the runtime handler can
	// make mounts recursively read-only (CRI RuntimeHandlerFeatures).
	RuntimeSupportsRecursiveReadOnly bool
	// TargetContainerID is the running container whose process namespace
	// an ephemeral container joins (its targetContainerName), or "".
	TargetContainerID string
	// Devices is what the container's device plugins answered to Allocate;
	// nil when it has no devices.
	Devices *devicemanager.DeviceRunContainerOptions
	// ClaimCDIDevices are the CDI device IDs (vendor.com/class=name) the
	// DRA drivers returned for the claims the container references.
	ClaimCDIDevices []string
	// UserNamespace is the pod's user namespace, as on its sandbox
	// (SandboxOptions.UserNamespace); nil for the node's.
	UserNamespace *runtimeapi.UserNamespace
}

// ContainerConfig builds the CRI config of container c of pod, as the
// kubelet's generateContainerConfig does. An error names the container and
// the field at fault.
func ContainerConfig(pod *v1.Pod, c *v1.Container, opts ContainerOptions) (*runtimeapi.ContainerConfig, error) {
	if opts.RestartCount < 0 {
		return nil, fmt.Errorf("container %q: negative restart count %d", c.Name, opts.RestartCount)
	}
	env, err := makeEnvironment(pod, c, opts)
	if err != nil {
		return nil, fmt.Errorf("container %q: %w", c.Name, err)
	}
	mounts, err := makeMounts(pod, c, opts, env)
	if err != nil {
		return nil, fmt.Errorf("container %q: %w", c.Name, err)
	}
	sc, err := containerSecurityContext(pod, c, opts)
	if err != nil {
		return nil, fmt.Errorf("container %q: %w", c.Name, err)
	}
	resources, err := containerResources(pod, c, opts.NodeMemoryCapacity, opts.Memory)
	if err != nil {
		return nil, err
	}
	image := opts.ImageRef
	if image == "" {
		image = c.Image
	}
	lookup := expansion.MapLookup(envMap(env))
	cfg := &runtimeapi.ContainerConfig{
		Metadata:   &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(opts.RestartCount)},
		Image:      &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: c.Image},
		Command:    expandAll(c.Command, lookup),
		Args:       expandAll(c.Args, lookup),
		WorkingDir: c.WorkingDir,
		Envs:       make([]*runtimeapi.KeyValue, len(env)),
		Mounts:     mounts,
		Labels: map[string]string{
			container.LabelPodName:       pod.Name,
			container.LabelPodNamespace:  pod.Namespace,
			container.LabelPodUID:        string(pod.UID),
			container.LabelContainerName: c.Name,
			container.LabelManagedBy:     "true",
		},
		Annotations: containerAnnotations(pod, c, opts),
		LogPath:     ContainerLogPath(c.Name, opts.RestartCount),
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
		Linux:       &runtimeapi.LinuxContainerConfig{Resources: resources, SecurityContext: sc},
	}
	for i, e := range env {
		cfg.Envs[i] = &runtimeapi.KeyValue{Key: e.name, Value: []byte(e.value)}
	}
	addDeviceOptions(cfg, opts.Devices)
	for _, name := range opts.ClaimCDIDevices {
		cfg.CDIDevices = append(cfg.CDIDevices, &runtimeapi.CDIDevice{Name: name})
	}
	idmapMounts(cfg.Mounts, sc.NamespaceOptions.UsernsOptions)
	return cfg, nil
}

// ContainerLogPath is the container's log file relative to the sandbox's log
// directory: <name>/<restartCount>.log.
func ContainerLogPath(name string, restartCount int) string {
	return filepath.Join(name, strconv.Itoa(restartCount)+".log")
}

// ContainerLogFile is the log file berth told the runtime to write for c,
// a container it created: PodLogsDirectory/ContainerLogPath, rebuilt from
// the labels and metadata the runtime lists it with, so that a caller need
// not ask ContainerStatus for it. It is "" for a container without berth's
// labels. The runtime's ContainerStatus stays the authority: a container
// created before podLogsDir changed has its log where the old one said.
func ContainerLogFile(podLogsDir string, c *runtimeapi.Container) string {
	l := c.GetLabels()
	ns, name, uid := l[container.LabelPodNamespace], l[container.LabelPodName], l[container.LabelPodUID]
	ctr := c.GetMetadata().GetName()
	if podLogsDir == "" || ns == "" || name == "" || uid == "" || ctr == "" {
		return ""
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}}
	return filepath.Join(PodLogsDirectory(podLogsDir, pod), ContainerLogPath(ctr, int(c.GetMetadata().GetAttempt())))
}

// ContainerHash returns the value of container.AnnotationContainerHash for
// c: an FNV-32a hash, in hex, of the fields whose change restarts a running
// container.
func ContainerHash(c *v1.Container) string {
	// Name and image only, as the kubelet hashes since 1.31: any other field
	// would make a berth upgrade that adds a default restart every container.
	// A static pod needs no more, since any edit of it is a new UID anyway.
	data, _ := json.Marshal(map[string]string{"name": c.Name, "image": c.Image})
	h := fnv.New32a()
	h.Write(data)
	return strconv.FormatUint(uint64(h.Sum32()), 16)
}

func containerAnnotations(pod *v1.Pod, c *v1.Container, opts ContainerOptions) map[string]string {
	a := map[string]string{
		container.AnnotationContainerHash:            ContainerHash(c),
		container.AnnotationRestartCount:             strconv.Itoa(opts.RestartCount),
		container.AnnotationTerminationMessagePath:   c.TerminationMessagePath,
		container.AnnotationTerminationMessagePolicy: string(c.TerminationMessagePolicy),
	}
	if opts.TerminationMessageHostPath != "" {
		a[container.AnnotationTerminationMessageHostPath] = opts.TerminationMessageHostPath
	}
	if t := pod.Spec.TerminationGracePeriodSeconds; t != nil {
		a[container.AnnotationTerminationGracePeriod] = strconv.FormatInt(*t, 10)
	}
	if opts.Init {
		a[container.AnnotationInitContainer] = "true"
	}
	// The runtime keeps what devices the container holds, for when berth
	// loses its device checkpoint.
	if v := opts.Devices.AnnotationValue(); v != "" {
		a[devicemanager.AnnotationDevices] = v
	}
	return a
}

func expandAll(in []string, lookup func(string) (string, bool)) []string {
	if len(in) == 0 {
		return nil
	}
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = expansion.Expand(s, lookup)
	}
	return out
}

// idmapMounts maps every mount of a container in its own user namespace to
// the pod's IDs, as the kubelet's applyPlatformSpecificContainerConfig
// does, so that files owned by root on the host (emptyDir, configMap and
// secret files) are root's in the container.
func idmapMounts(mounts []*runtimeapi.Mount, userns *runtimeapi.UserNamespace) {
	if userns == nil || userns.Mode != runtimeapi.NamespaceMode_POD {
		return
	}
	for _, m := range mounts {
		m.UidMappings, m.GidMappings = userns.Uids, userns.Gids
	}
}
