package kuberuntime

import (
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/expansion"
	"github.com/berth-dev/berth/internal/fieldpath"
)

// envVar is one resolved environment variable.
type envVar struct {
	name, value string
}

// makeEnvironment resolves the container's env the way the kubelet's
// makeEnvironmentVariables does: envFrom first, then env, so that env
// replaces what envFrom set; each value may reference variables declared
// before it with $(NAME); each valueFrom is resolved from the pod (downward
// API), the node, or the configMaps and secrets in opts.EnvObjects. A later
// declaration of a name replaces the value of an earlier one; the result
// keeps the order of first declaration (envFrom keys sorted within their
// source) so that the container's environment is deterministic.
//
// Without opts.EnvObjects (a standalone node has no API server) envFrom and
// configMap/secret references are rejected with a clear error rather than
// silently dropped.
//
// The service variables of opts.ServiceEnv lie beneath: $(NAME) may refer
// to them, the container's own declarations replace them, and those it
// leaves come last, as the kubelet appends the "remaining service
// environment vars" after the container's.
func makeEnvironment(pod *v1.Pod, c *v1.Container, opts ContainerOptions) ([]envVar, error) {
	values := make(map[string]string, len(c.Env))
	order := make([]string, 0, len(c.Env)+len(opts.ServiceEnv))
	set := func(name, val string) {
		if _, seen := values[name]; !seen {
			order = append(order, name)
		}
		values[name] = val
	}
	for i := range c.EnvFrom {
		if err := envFrom(&c.EnvFrom[i], opts.EnvObjects, set); err != nil {
			return nil, fmt.Errorf("envFrom[%d].%w", i, err)
		}
	}
	services, serviceOrder := serviceValues(opts.ServiceEnv)
	// A reference sees the container's variables declared so far, then the
	// service variables (the kubelet's MappingFuncFor(tmpEnv, serviceEnv)):
	// before the container redeclares a service variable, a reference to it
	// still gets the service's value.
	lookup := expansion.MapLookup(values, services)
	for i := range c.Env {
		e := &c.Env[i]
		var val string
		switch {
		case e.Value != "":
			val = expansion.Expand(e.Value, lookup)
		case e.ValueFrom != nil:
			var err error
			var found bool
			if val, found, err = envValueFrom(pod, c, e.ValueFrom, opts); err != nil {
				return nil, fmt.Errorf("env[%d] %q: %w", i, e.Name, err)
			}
			if !found {
				// An optional reference to something absent sets
				// nothing, not even an empty value.
				continue
			}
		}
		set(e.Name, val)
	}
	for _, name := range serviceOrder {
		if _, mine := values[name]; !mine {
			order = append(order, name)
			values[name] = services[name]
		}
	}
	env := make([]envVar, len(order))
	for i, name := range order {
		env[i] = envVar{name: name, value: values[name]}
	}
	return env, nil
}

// serviceValues indexes the service variables by name, a later duplicate
// replacing an earlier one, and gives their order of first declaration.
func serviceValues(env []v1.EnvVar) (map[string]string, []string) {
	values := make(map[string]string, len(env))
	order := make([]string, 0, len(env))
	for _, e := range env {
		if _, seen := values[e.Name]; !seen {
			order = append(order, e.Name)
		}
		values[e.Name] = e.Value
	}
	return values, order
}

func envMap(env []envVar) map[string]string {
	m := make(map[string]string, len(env))
	for _, e := range env {
		m[e.name] = e.value
	}
	return m
}

// envValueFrom resolves one valueFrom; found is false when an optional
// configMap or secret reference points at nothing.
func envValueFrom(pod *v1.Pod, c *v1.Container, src *v1.EnvVarSource, opts ContainerOptions) (val string, found bool, err error) {
	switch {
	case src.FieldRef != nil:
		v, err := podFieldValue(pod, src.FieldRef, opts)
		if err != nil {
			return "", false, fmt.Errorf("valueFrom.fieldRef: %w", err)
		}
		return v, true, nil
	case src.ResourceFieldRef != nil:
		v, err := fieldpath.ExtractResourceValue(pod, c, src.ResourceFieldRef, opts.NodeAllocatable)
		if err != nil {
			return "", false, fmt.Errorf("valueFrom.resourceFieldRef: %w", err)
		}
		return v, true, nil
	case src.ConfigMapKeyRef != nil:
		v, found, err := configMapKey(pod, src.ConfigMapKeyRef, opts.EnvObjects)
		if err != nil {
			return "", false, fmt.Errorf("valueFrom.configMapKeyRef: %w", err)
		}
		return v, found, nil
	case src.SecretKeyRef != nil:
		v, found, err := secretKey(pod, src.SecretKeyRef, opts.EnvObjects)
		if err != nil {
			return "", false, fmt.Errorf("valueFrom.secretKeyRef: %w", err)
		}
		return v, found, nil
	case src.FileKeyRef != nil:
		return "", false, fmt.Errorf("valueFrom.fileKeyRef: not supported")
	}
	return "", false, fmt.Errorf("valueFrom: no source set")
}

// podFieldValue resolves a downward API field reference (kubelet
// podFieldSelectorRuntimeValue): the spec and status fields here, since
// some need the node's facts in opts, and the metadata ones through
// fieldpath, which downwardAPI volumes share.
func podFieldValue(pod *v1.Pod, ref *v1.ObjectFieldSelector, opts ContainerOptions) (string, error) {
	if ref.APIVersion != "" && ref.APIVersion != "v1" {
		return "", fmt.Errorf("unsupported apiVersion %q for fieldPath %q", ref.APIVersion, ref.FieldPath)
	}
	switch ref.FieldPath {
	case "spec.nodeName":
		if pod.Spec.NodeName != "" {
			return pod.Spec.NodeName, nil
		}
		return opts.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "spec.terminationGracePeriodSeconds":
		if t := pod.Spec.TerminationGracePeriodSeconds; t != nil {
			return strconv.FormatInt(*t, 10), nil
		}
		return strconv.Itoa(v1.DefaultTerminationGracePeriodSeconds), nil
	case "status.podIP":
		ip, _ := podIPs(opts)
		return ip, nil
	case "status.podIPs":
		_, ips := podIPs(opts)
		return strings.Join(ips, ","), nil
	case "status.hostIP":
		ip, _ := hostIPs(opts)
		return ip, nil
	case "status.hostIPs":
		_, ips := hostIPs(opts)
		return strings.Join(ips, ","), nil
	}
	return fieldpath.ExtractFieldPathAsString(pod, ref.FieldPath)
}

// podIPs returns the primary pod IP and the full list, filling either from
// the other when only one was given.
func podIPs(opts ContainerOptions) (string, []string) {
	return primaryAndAll(opts.PodIP, opts.PodIPs)
}

func hostIPs(opts ContainerOptions) (string, []string) {
	return primaryAndAll(opts.HostIP, opts.HostIPs)
}

func primaryAndAll(primary string, all []string) (string, []string) {
	switch {
	case primary == "" && len(all) > 0:
		return all[0], all
	case primary != "" && len(all) == 0:
		return primary, []string{primary}
	}
	return primary, all
}
