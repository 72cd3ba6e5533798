package kuberuntime

import (
	"fmt"
	"math"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The kubelet's default masked and read-only /proc and /sys paths
// (pkg/securitycontext/util.go), kept in step with moby's. A fresh slice is
// returned each time so no caller can alter the defaults.
func defaultMaskedPaths() []string {
	return []string{
		"/proc/asound",
		"/proc/acpi",
		"/proc/kcore",
		"/proc/keys",
		"/proc/latency_stats",
		"/proc/timer_list",
		"/proc/timer_stats",
		"/proc/sched_debug",
		"/proc/scsi",
		"/sys/firmware",
		"/sys/devices/virtual/powercap",
	}
}

func defaultReadonlyPaths() []string {
	return []string{
		"/proc/bus",
		"/proc/fs",
		"/proc/irq",
		"/proc/sys",
		"/proc/sysrq-trigger",
	}
}

// namespaceOptions maps the pod's host* fields to CRI namespace modes, as the
// kubelet's NamespacesForPod does. The same options go on the sandbox and on
// every container. userns is the pod's user namespace (package userns),
// nil for the node's.
func namespaceOptions(pod *v1.Pod, userns *runtimeapi.UserNamespace) (*runtimeapi.NamespaceOption, error) {
	if userns == nil {
		userns = &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}
	}
	if pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers && userns.Mode != runtimeapi.NamespaceMode_POD {
		return nil, fmt.Errorf("spec.hostUsers: false: the pod has no user namespace mappings")
	}
	ns := &runtimeapi.NamespaceOption{
		Network:       runtimeapi.NamespaceMode_POD,
		Pid:           runtimeapi.NamespaceMode_CONTAINER,
		Ipc:           runtimeapi.NamespaceMode_POD,
		UsernsOptions: userns,
	}
	if pod.Spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	switch {
	case pod.Spec.HostPID:
		ns.Pid = runtimeapi.NamespaceMode_NODE
	case pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace:
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	return ns, nil
}

// hasPrivilegedContainer reports whether any container of the pod is
// privileged; the sandbox must then be privileged too.
func hasPrivilegedContainer(pod *v1.Pod) bool {
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if sc := list[i].SecurityContext; sc != nil && sc.Privileged != nil && *sc.Privileged {
				return true
			}
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if sc := pod.Spec.EphemeralContainers[i].SecurityContext; sc != nil && sc.Privileged != nil && *sc.Privileged {
			return true
		}
	}
	return false
}

// effectiveSecurityContext overlays the container's security context on the
// fields it inherits from the pod's (pkg/securitycontext
// DetermineEffectiveSecurityContext). The result is a fresh value.
func effectiveSecurityContext(pod *v1.Pod, c *v1.Container) *v1.SecurityContext {
	eff := &v1.SecurityContext{}
	if psc := pod.Spec.SecurityContext; psc != nil {
		eff.SELinuxOptions = psc.SELinuxOptions
		eff.WindowsOptions = psc.WindowsOptions
		eff.RunAsUser = psc.RunAsUser
		eff.RunAsGroup = psc.RunAsGroup
		eff.RunAsNonRoot = psc.RunAsNonRoot
	}
	csc := c.SecurityContext
	if csc == nil {
		return eff
	}
	if csc.SELinuxOptions != nil {
		eff.SELinuxOptions = csc.SELinuxOptions
	}
	if csc.WindowsOptions != nil {
		eff.WindowsOptions = csc.WindowsOptions
	}
	if csc.RunAsUser != nil {
		eff.RunAsUser = csc.RunAsUser
	}
	if csc.RunAsGroup != nil {
		eff.RunAsGroup = csc.RunAsGroup
	}
	if csc.RunAsNonRoot != nil {
		eff.RunAsNonRoot = csc.RunAsNonRoot
	}
	eff.Capabilities = csc.Capabilities
	eff.Privileged = csc.Privileged
	eff.ReadOnlyRootFilesystem = csc.ReadOnlyRootFilesystem
	eff.AllowPrivilegeEscalation = csc.AllowPrivilegeEscalation
	eff.ProcMount = csc.ProcMount
	return eff
}

// ImageUser is the user an image runs as, read from the runtime's
// ImageStatus record the way the kubelet's getImageUser reads it: the
// numeric uid when the runtime found one, else the user name; an image that
// names no user (or no record at all) runs as root, so it is uid 0 and
// runAsNonRoot refuses it.
func ImageUser(img *runtimeapi.Image) (uid *int64, username string) {
	if img != nil {
		if img.Uid != nil {
			v := img.Uid.Value
			return &v, ""
		}
		if img.Username != "" {
			return nil, img.Username
		}
	}
	return new(int64), ""
}

// VerifyRunAsNonRoot refuses to start container c of pod when it asks for
// runAsNonRoot but would run as root, or as a user that cannot be checked,
// with the kubelet's own messages (pkg/kubelet/kuberuntime
// verifyRunAsNonRoot): tools and people match on them. imageUID and
// imageUser are what ImageUser answered for the container's image.
func VerifyRunAsNonRoot(pod *v1.Pod, c *v1.Container, imageUID *int64, imageUser string) error {
	return verifyRunAsNonRoot(pod, c, effectiveSecurityContext(pod, c), imageUID, imageUser)
}

func verifyRunAsNonRoot(pod *v1.Pod, c *v1.Container, eff *v1.SecurityContext, imageUID *int64, imageUser string) error {
	if eff.RunAsNonRoot == nil || !*eff.RunAsNonRoot {
		return nil
	}
	who := podDesc(pod)
	if eff.RunAsUser != nil {
		// The user the pod asks for replaces the image's: only it counts.
		if *eff.RunAsUser == 0 {
			return fmt.Errorf("container's runAsUser breaks non-root policy (pod: %q, container: %s)", who, c.Name)
		}
		return nil
	}
	switch {
	case imageUID == nil && imageUser != "":
		// A name is resolved by the runtime inside the image, after this
		// check: it might be root.
		return fmt.Errorf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (pod: %q, container: %s)",
			imageUser, who, c.Name)
	case imageUID == nil:
		// Unknown: ImageUser never answers this, and the kubelet lets it pass.
		return nil
	case *imageUID == 0:
		return fmt.Errorf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", who, c.Name)
	}
	if errs := validation.IsValidUserID(*imageUID); len(errs) > 0 {
		return fmt.Errorf("container has runAsNonRoot and image has an invalid user id (%d). (Must be 1-(%d)): %s (pod: %q, container: %s)",
			*imageUID, math.MaxInt32, strings.Join(errs, "; "), who, c.Name)
	}
	return nil
}

// podDesc names a pod as the kubelet's format.Pod does in its errors,
// "name_namespace(uid)": "_" cannot occur in a pod's name or namespace.
func podDesc(pod *v1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

// containerSecurityContext builds the CRI security context of a container
// the way the kubelet's determineEffectiveSecurityContext does.
func containerSecurityContext(pod *v1.Pod, c *v1.Container, opts ContainerOptions) (*runtimeapi.LinuxContainerSecurityContext, error) {
	eff := effectiveSecurityContext(pod, c)
	if err := verifyRunAsNonRoot(pod, c, eff, opts.ImageUID, opts.ImageUser); err != nil {
		return nil, err
	}
	sc := &runtimeapi.LinuxContainerSecurityContext{
		SelinuxOptions: seLinuxOption(eff.SELinuxOptions),
		Privileged:     eff.Privileged != nil && *eff.Privileged,
		ReadonlyRootfs: eff.ReadOnlyRootFilesystem != nil && *eff.ReadOnlyRootFilesystem,
		// no_new_privs only when allowPrivilegeEscalation is explicitly false.
		NoNewPrivs: eff.AllowPrivilegeEscalation != nil && !*eff.AllowPrivilegeEscalation,
	}
	if caps := eff.Capabilities; caps != nil {
		// CRI takes the Kubernetes names unchanged ("NET_ADMIN", "ALL"); the
		// runtime adds the CAP_ prefix.
		sc.Capabilities = &runtimeapi.Capability{
			AddCapabilities:  make([]string, len(caps.Add)),
			DropCapabilities: make([]string, len(caps.Drop)),
		}
		for i, name := range caps.Add {
			sc.Capabilities.AddCapabilities[i] = string(name)
		}
		for i, name := range caps.Drop {
			sc.Capabilities.DropCapabilities[i] = string(name)
		}
	}
	switch {
	case eff.RunAsUser != nil:
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *eff.RunAsUser}
	case opts.ImageUID != nil:
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *opts.ImageUID}
	default:
		sc.RunAsUsername = opts.ImageUser
	}
	if eff.RunAsGroup != nil {
		sc.RunAsGroup = &runtimeapi.Int64Value{Value: *eff.RunAsGroup}
	}
	// A privileged container sees /proc and /sys unmasked anyway; an empty
	// list says so plainly instead of relying on the runtime to drop it.
	if !sc.Privileged && (eff.ProcMount == nil || *eff.ProcMount != v1.UnmaskedProcMount) {
		sc.MaskedPaths = defaultMaskedPaths()
		sc.ReadonlyPaths = defaultReadonlyPaths()
	}
	var err error
	if sc.Seccomp, err = seccompProfile(pod.Spec.SecurityContext, c.SecurityContext, opts.SeccompProfileRoot, opts.SeccompDefault); err != nil {
		return nil, err
	}
	if sc.Apparmor, sc.ApparmorProfile, err = appArmorProfile(pod.Spec.SecurityContext, c.SecurityContext); err != nil {
		return nil, err
	}
	if sc.NamespaceOptions, err = namespaceOptions(pod, opts.UserNamespace); err != nil {
		return nil, err
	}
	if opts.TargetContainerID != "" {
		// An ephemeral container debugging a target sees its processes
		// (kubelet: NamespaceMode TARGET with the target's ID).
		sc.NamespaceOptions.Pid = runtimeapi.NamespaceMode_TARGET
		sc.NamespaceOptions.TargetId = opts.TargetContainerID
	}
	groups, policy, err := supplementalGroups(pod.Spec.SecurityContext)
	if err != nil {
		return nil, err
	}
	sc.SupplementalGroups, sc.SupplementalGroupsPolicy = groups, policy
	return sc, nil
}

// supplementalGroups are the pod's fsGroup followed by its supplemental
// groups, which every container and the sandbox get.
func supplementalGroups(psc *v1.PodSecurityContext) ([]int64, runtimeapi.SupplementalGroupsPolicy, error) {
	if psc == nil {
		return nil, runtimeapi.SupplementalGroupsPolicy_Merge, nil
	}
	var groups []int64
	if psc.FSGroup != nil {
		groups = append(groups, *psc.FSGroup)
	}
	groups = append(groups, psc.SupplementalGroups...)
	policy := runtimeapi.SupplementalGroupsPolicy_Merge
	if psc.SupplementalGroupsPolicy != nil {
		switch *psc.SupplementalGroupsPolicy {
		case v1.SupplementalGroupsPolicyMerge:
		case v1.SupplementalGroupsPolicyStrict:
			policy = runtimeapi.SupplementalGroupsPolicy_Strict
		default:
			return nil, 0, fmt.Errorf("spec.securityContext.supplementalGroupsPolicy: unsupported value %q", *psc.SupplementalGroupsPolicy)
		}
	}
	return groups, policy, nil
}

func seLinuxOption(o *v1.SELinuxOptions) *runtimeapi.SELinuxOption {
	if o == nil {
		return nil
	}
	return &runtimeapi.SELinuxOption{User: o.User, Role: o.Role, Type: o.Type, Level: o.Level}
}

// seccompProfile picks the container's profile, else the pod's, else the
// node default (kubelet getSeccompProfile).
func seccompProfile(psc *v1.PodSecurityContext, csc *v1.SecurityContext, profileRoot string, runtimeDefault bool) (*runtimeapi.SecurityProfile, error) {
	var p *v1.SeccompProfile
	field := ""
	switch {
	case csc != nil && csc.SeccompProfile != nil:
		p, field = csc.SeccompProfile, "securityContext.seccompProfile"
	case psc != nil && psc.SeccompProfile != nil:
		p, field = psc.SeccompProfile, "spec.securityContext.seccompProfile"
	case runtimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
	default:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	}
	switch p.Type {
	case v1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
	case v1.SeccompProfileTypeUnconfined:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	case v1.SeccompProfileTypeLocalhost:
		if p.LocalhostProfile == nil || *p.LocalhostProfile == "" {
			return nil, fmt.Errorf("%s: localhostProfile must be set when type is Localhost", field)
		}
		ref, err := localhostProfilePath(profileRoot, field, *p.LocalhostProfile)
		if err != nil {
			return nil, err
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: ref}, nil
	default:
		return nil, fmt.Errorf("%s: unsupported type %q", field, p.Type)
	}
}

// appArmorProfile picks the container's AppArmor profile, else the pod's; with
// neither, the runtime applies its default. The second result is the
// deprecated string form the CRI still carries for older runtimes.
func appArmorProfile(psc *v1.PodSecurityContext, csc *v1.SecurityContext) (*runtimeapi.SecurityProfile, string, error) {
	var p *v1.AppArmorProfile
	field := ""
	switch {
	case csc != nil && csc.AppArmorProfile != nil:
		p, field = csc.AppArmorProfile, "securityContext.appArmorProfile"
	case psc != nil && psc.AppArmorProfile != nil:
		p, field = psc.AppArmorProfile, "spec.securityContext.appArmorProfile"
	default:
		return nil, "", nil
	}
	switch p.Type {
	case v1.AppArmorProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, "runtime/default", nil
	case v1.AppArmorProfileTypeUnconfined:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, "unconfined", nil
	case v1.AppArmorProfileTypeLocalhost:
		if p.LocalhostProfile == nil || *p.LocalhostProfile == "" {
			return nil, "", fmt.Errorf("%s: localhostProfile must be set when type is Localhost", field)
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: *p.LocalhostProfile},
			"localhost/" + *p.LocalhostProfile, nil
	default:
		return nil, "", fmt.Errorf("%s: unsupported type %q", field, p.Type)
	}
}
