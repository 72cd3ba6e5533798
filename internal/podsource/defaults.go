package podsource

import (
	"github.com/distribution/reference"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// SetDefaults fills in what the API server would when this pod is created:
// the v1 defaulting of k8s.io/kubernetes pkg/apis/core/v1 (defaults.go and the
// +default tags of k8s.io/api/core/v1) for the fields a node reads, and the
// priority that the Priority admission plugin gives the built-in classes.
// It is pure and idempotent.
func SetDefaults(pod *v1.Pod) {
	spec := &pod.Spec
	setPodSpecDefaults(spec)
	for i := range spec.InitContainers {
		setContainerDefaults(&spec.InitContainers[i], spec.HostNetwork)
	}
	for i := range spec.Containers {
		setContainerDefaults(&spec.Containers[i], spec.HostNetwork)
	}
	for i := range spec.Volumes {
		setVolumeDefaults(&spec.Volumes[i])
	}
	setPriorityDefaults(spec)
}

func setPodSpecDefaults(spec *v1.PodSpec) {
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = v1.DNSClusterFirst
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = v1.RestartPolicyAlways
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &v1.PodSecurityContext{}
	}
	if spec.TerminationGracePeriodSeconds == nil {
		spec.TerminationGracePeriodSeconds = ptr.To[int64](v1.DefaultTerminationGracePeriodSeconds)
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = v1.DefaultSchedulerName
	}
	if spec.EnableServiceLinks == nil {
		spec.EnableServiceLinks = ptr.To(v1.DefaultEnableServiceLinks)
	}
}

func setContainerDefaults(c *v1.Container, hostNetwork bool) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = defaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = v1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = v1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		p := &c.Ports[i]
		if p.Protocol == "" {
			p.Protocol = v1.ProtocolTCP
		}
		// On the host's network a container port is a host port.
		if hostNetwork && p.HostPort == 0 {
			p.HostPort = p.ContainerPort
		}
	}
	for i := range c.Env {
		setEnvDefaults(&c.Env[i])
	}
	setResourceDefaults(&c.Resources)
	for _, p := range []*v1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		if p != nil {
			setProbeDefaults(p)
		}
	}
	if c.Lifecycle != nil {
		for _, h := range []*v1.LifecycleHandler{c.Lifecycle.PostStart, c.Lifecycle.PreStop} {
			if h != nil && h.HTTPGet != nil {
				setHTTPGetDefaults(h.HTTPGet)
			}
		}
	}
}

// defaultPullPolicy is Always for an image that floats (":latest", or no tag
// and no digest) and IfNotPresent otherwise, as the API server decides it.
func defaultPullPolicy(image string) v1.PullPolicy {
	if imageTag(image) == "latest" {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}

// imageTag is the tag the kubelet reads from an image reference: "latest"
// when it names neither tag nor digest, "" when it names only a digest or
// does not parse (validation of the reference is left to the image puller,
// as with the API server).
func imageTag(image string) string {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return ""
	}
	if tagged, ok := named.(reference.Tagged); ok {
		return tagged.Tag()
	}
	if _, ok := named.(reference.Digested); ok {
		return ""
	}
	return "latest"
}

func setEnvDefaults(e *v1.EnvVar) {
	if e.ValueFrom == nil {
		return
	}
	if f := e.ValueFrom.FieldRef; f != nil && f.APIVersion == "" {
		f.APIVersion = "v1"
	}
	// The API server leaves a missing divisor at 0 and the kubelet reads 0
	// as 1; writing the 1 down keeps that rule in one place.
	if r := e.ValueFrom.ResourceFieldRef; r != nil && r.Divisor.IsZero() {
		r.Divisor = resource.MustParse("1")
	}
}

// setResourceDefaults rounds every quantity up to milli precision (the API
// server keeps no finer value) and lets each limit stand in for a missing
// request of the same resource.
func setResourceDefaults(r *v1.ResourceRequirements) {
	roundUpToMilli(r.Limits)
	roundUpToMilli(r.Requests)
	if len(r.Limits) == 0 {
		return
	}
	if r.Requests == nil {
		r.Requests = make(v1.ResourceList, len(r.Limits))
	}
	for name, limit := range r.Limits {
		if _, ok := r.Requests[name]; !ok {
			r.Requests[name] = limit.DeepCopy()
		}
	}
}

func roundUpToMilli(list v1.ResourceList) {
	for name, q := range list {
		q.RoundUp(resource.Milli)
		list[name] = q
	}
}

func setProbeDefaults(p *v1.Probe) {
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	if p.HTTPGet != nil {
		setHTTPGetDefaults(p.HTTPGet)
	}
	if p.GRPC != nil && p.GRPC.Service == nil {
		p.GRPC.Service = ptr.To("")
	}
}

func setHTTPGetDefaults(h *v1.HTTPGetAction) {
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = v1.URISchemeHTTP
	}
}

func setVolumeDefaults(v *v1.Volume) {
	if len(volumeSources(&v.VolumeSource)) == 0 {
		v.EmptyDir = &v1.EmptyDirVolumeSource{}
	}
	if v.HostPath != nil && v.HostPath.Type == nil {
		v.HostPath.Type = ptr.To(v1.HostPathUnset)
	}
	// As for a container's image (SetDefaults_Volume, ImageVolume on).
	if v.Image != nil && v.Image.PullPolicy == "" {
		v.Image.PullPolicy = defaultPullPolicy(v.Image.Reference)
	}
}
