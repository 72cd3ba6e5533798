package podsource

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateContainers checks init and app containers; their names share one
// namespace.
func validateContainers(spec *v1.PodSpec, volumes map[string]bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	for _, c := range spec.InitContainers {
		names[c.Name] = true
	}
	for _, c := range spec.Containers {
		names[c.Name] = true
	}
	seen := map[string]bool{}
	// Sidecars run beside the app containers; other init containers alone.
	var together []placedContainer

	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		p := fldPath.Child("initContainers").Index(i)
		errs = append(errs, validateContainerName(c.Name, seen, p.Child("name"))...)
		errs = append(errs, validateContainer(c, spec, volumes, names, p)...)
		errs = append(errs, validateInitContainer(c, spec.TerminationGracePeriodSeconds, p)...)
		if isSidecar(c) {
			together = append(together, placedContainer{c, p})
		} else {
			errs = append(errs, validateHostPortConflicts([]placedContainer{{c, p}})...)
		}
	}

	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(fldPath.Child("containers"), ""))
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		p := fldPath.Child("containers").Index(i)
		together = append(together, placedContainer{c, p})
		errs = append(errs, validateContainerName(c.Name, seen, p.Child("name"))...)
		errs = append(errs, validateContainer(c, spec, volumes, names, p)...)
		errs = append(errs, validateProbes(c, p)...)
		errs = append(errs, validateLifecycle(c.Lifecycle, spec.TerminationGracePeriodSeconds, p.Child("lifecycle"))...)
		errs = append(errs, validateContainerRestartPolicy(c, p)...)
	}
	return append(errs, validateHostPortConflicts(together)...)
}

// validateInitContainer checks what is particular to init containers: only
// a sidecar (restartPolicy Always) keeps running, so only it may have probes
// and hooks.
func validateInitContainer(c *v1.Container, gracePeriod *int64, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	sidecar := isSidecar(c)
	errs = append(errs, validateInitContainerRestartPolicy(c, fldPath)...)
	if sidecar {
		errs = append(errs, validateProbes(c, fldPath)...)
		return append(errs, validateLifecycle(c.Lifecycle, gracePeriod, fldPath.Child("lifecycle"))...)
	}
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"livenessProbe", c.LivenessProbe != nil},
		{"readinessProbe", c.ReadinessProbe != nil},
		{"startupProbe", c.StartupProbe != nil},
		{"lifecycle", c.Lifecycle != nil},
	} {
		if f.set {
			errs = append(errs, field.Forbidden(fldPath.Child(f.name), "may not be set for init containers without restartPolicy=Always"))
		}
	}
	return errs
}

func isSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

func validateContainerName(name string, seen map[string]bool, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(name) {
		errs = append(errs, field.Invalid(fldPath, name, msg))
	}
	if seen[name] {
		errs = append(errs, field.Duplicate(fldPath, name))
	}
	seen[name] = true
	return errs
}

// validateContainer checks what init and app containers share.
func validateContainer(c *v1.Container, spec *v1.PodSpec, volumes, containers map[string]bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case c.Image == "":
		errs = append(errs, field.Required(fldPath.Child("image"), ""))
	case strings.TrimSpace(c.Image) != c.Image:
		errs = append(errs, field.Invalid(fldPath.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	errs = append(errs, oneOfEnum(c.ImagePullPolicy, fldPath.Child("imagePullPolicy"),
		v1.PullAlways, v1.PullIfNotPresent, v1.PullNever)...)
	errs = append(errs, oneOfEnum(c.TerminationMessagePolicy, fldPath.Child("terminationMessagePolicy"),
		v1.TerminationMessageReadFile, v1.TerminationMessageFallbackToLogsOnError)...)
	errs = append(errs, validateContainerPorts(c.Ports, spec.HostNetwork, fldPath.Child("ports"))...)
	errs = append(errs, validateEnv(c.Env, containers, fldPath.Child("env"))...)
	errs = append(errs, validateEnvFrom(c.EnvFrom, fldPath.Child("envFrom"))...)
	privileged := c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
	errs = append(errs, validateVolumeMounts(c.VolumeMounts, volumes, privileged, fldPath.Child("volumeMounts"))...)
	if len(c.VolumeDevices) > 0 {
		errs = append(errs, needsAPIServer(fldPath.Child("volumeDevices")))
	}
	errs = append(errs, validateResources(&c.Resources, fldPath.Child("resources"))...)
	if sc := c.SecurityContext; sc != nil {
		errs = append(errs, validateIDs(sc.RunAsUser, sc.RunAsGroup, fldPath.Child("securityContext"))...)
	}
	return errs
}

// oneOfEnum checks a required enum field.
func oneOfEnum[T ~string](value T, fldPath *field.Path, valid ...T) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	for _, v := range valid {
		if value == v {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(fldPath, value, valid)}
}

func validateContainerPorts(ports []v1.ContainerPort, hostNetwork bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	for i, port := range ports {
		p := fldPath.Index(i)
		if port.Name != "" {
			msgs := validation.IsValidPortName(port.Name)
			for _, msg := range msgs {
				errs = append(errs, field.Invalid(p.Child("name"), port.Name, msg))
			}
			if len(msgs) == 0 && names[port.Name] {
				errs = append(errs, field.Duplicate(p.Child("name"), port.Name))
			}
			names[port.Name] = true
		}
		if port.ContainerPort == 0 {
			errs = append(errs, field.Required(p.Child("containerPort"), ""))
		} else {
			for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
				errs = append(errs, field.Invalid(p.Child("containerPort"), port.ContainerPort, msg))
			}
		}
		if port.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
				errs = append(errs, field.Invalid(p.Child("hostPort"), port.HostPort, msg))
			}
		}
		if hostNetwork && port.HostPort != port.ContainerPort {
			errs = append(errs, field.Invalid(p.Child("hostPort"), port.HostPort, "must match `containerPort` when `hostNetwork` is true"))
		}
		errs = append(errs, oneOfEnum(port.Protocol, p.Child("protocol"), v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP)...)
		if port.HostIP != "" {
			errs = append(errs, validation.IsValidIP(p.Child("hostIP"), port.HostIP)...)
		}
	}
	return errs
}

// placedContainer is a container and where it is in the pod.
type placedContainer struct {
	c    *v1.Container
	path *field.Path
}

// validateHostPortConflicts refuses two ports of containers that run at the
// same time asking for the same host IP, protocol and port.
func validateHostPortConflicts(group []placedContainer) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for _, pc := range group {
		for j, port := range pc.c.Ports {
			if port.HostPort == 0 {
				continue
			}
			key := fmt.Sprintf("%s/%s/%d", port.HostIP, port.Protocol, port.HostPort)
			if seen[key] {
				errs = append(errs, field.Duplicate(pc.path.Child("ports").Index(j).Child("hostPort"), key))
			}
			seen[key] = true
		}
	}
	return errs
}

func validateEnv(env []v1.EnvVar, containers map[string]bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, e := range env {
		p := fldPath.Index(i)
		if e.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		} else {
			for _, msg := range validation.IsRelaxedEnvVarName(e.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), e.Name, msg))
			}
		}
		if e.ValueFrom != nil {
			errs = append(errs, validateEnvVarSource(e, containers, p.Child("valueFrom"))...)
		}
	}
	return errs
}

func validateEnvVarSource(e v1.EnvVar, containers map[string]bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	vf := e.ValueFrom
	n := 0
	if vf.FieldRef != nil {
		n++
		errs = append(errs, validateObjectFieldSelector(vf.FieldRef, fldPath.Child("fieldRef"))...)
	}
	if vf.ResourceFieldRef != nil {
		n++
		errs = append(errs, validateResourceFieldSelector(vf.ResourceFieldRef, containers, fldPath.Child("resourceFieldRef"))...)
	}
	if vf.ConfigMapKeyRef != nil {
		n++
		errs = append(errs, needsAPIServer(fldPath.Child("configMapKeyRef")))
	}
	if vf.SecretKeyRef != nil {
		n++
		errs = append(errs, needsAPIServer(fldPath.Child("secretKeyRef")))
	}
	if vf.FileKeyRef != nil {
		n++
		errs = append(errs, field.Forbidden(fldPath.Child("fileKeyRef"), "is not supported by berth"))
	}
	switch {
	case n == 0:
		errs = append(errs, field.Invalid(fldPath, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef`, `secretKeyRef` or `fileKeyRef`"))
	case n > 1:
		errs = append(errs, field.Invalid(fldPath, "", "may not have more than one field specified at a time"))
	}
	if e.Value != "" {
		errs = append(errs, field.Invalid(fldPath, "", "may not be specified when `value` is not empty"))
	}
	return errs
}

// validateObjectFieldSelector accepts the pod fields the kubelet can put in
// an environment variable.
func validateObjectFieldSelector(sel *v1.ObjectFieldSelector, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if sel.APIVersion != "v1" {
		errs = append(errs, field.NotSupported(fldPath.Child("apiVersion"), sel.APIVersion, []string{"v1"}))
	}
	fp := fldPath.Child("fieldPath")
	if sel.FieldPath == "" {
		return append(errs, field.Required(fp, ""))
	}
	if base, key, ok := splitSubscript(sel.FieldPath); ok {
		switch base {
		case "metadata.labels":
			for _, msg := range content.IsLabelKey(key) {
				errs = append(errs, field.Invalid(fp, sel.FieldPath, msg))
			}
		case "metadata.annotations":
			for _, msg := range content.IsLabelKey(strings.ToLower(key)) {
				errs = append(errs, field.Invalid(fp, sel.FieldPath, msg))
			}
		default:
			errs = append(errs, field.Invalid(fp, sel.FieldPath, "does not support subscript"))
		}
		return errs
	}
	supported := []string{
		"metadata.name", "metadata.namespace", "metadata.uid",
		"spec.nodeName", "spec.serviceAccountName",
		"status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs",
	}
	for _, s := range supported {
		if sel.FieldPath == s {
			return errs
		}
	}
	return append(errs, field.NotSupported(fp, sel.FieldPath, supported))
}

// splitSubscript splits "metadata.labels['app']" into its base and key.
func splitSubscript(fieldPath string) (base, key string, ok bool) {
	i := strings.Index(fieldPath, "['")
	if i < 0 || !strings.HasSuffix(fieldPath, "']") || i+2 > len(fieldPath)-2 {
		return "", "", false
	}
	return fieldPath[:i], fieldPath[i+2 : len(fieldPath)-2], true
}

func validateEnvFrom(sources []v1.EnvFromSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, s := range sources {
		p := fldPath.Index(i)
		if s.ConfigMapRef != nil {
			errs = append(errs, needsAPIServer(p.Child("configMapRef")))
		}
		if s.SecretRef != nil {
			errs = append(errs, needsAPIServer(p.Child("secretRef")))
		}
		if s.ConfigMapRef == nil && s.SecretRef == nil {
			errs = append(errs, field.Invalid(p, "", "must specify one of: `configMapRef` or `secretRef`"))
		}
	}
	return errs
}
