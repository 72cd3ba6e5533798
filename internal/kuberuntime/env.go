package kuberuntime

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/berth-dev/berth/internal/expansion"
)

// envVar is one resolved environment variable.
type envVar struct {
	name, value string
}

// makeEnvironment resolves the container's env the way the kubelet's
// makeEnvironmentVariables does: each value may reference variables declared
// before it with $(NAME), each valueFrom is resolved from the pod (downward
// API) or the node. A later declaration of a name replaces the value of an
// earlier one; the result keeps the order of first declaration so that the
// container's environment is deterministic.
//
// envFrom and configMap/secret references need an API server, which a
// standalone node does not have: they are rejected with a clear error rather
// than silently dropped.
func makeEnvironment(pod *v1.Pod, c *v1.Container, opts ContainerOptions) ([]envVar, error) {
	for i, from := range c.EnvFrom {
		src := "configMapRef"
		if from.SecretRef != nil {
			src = "secretRef"
		}
		return nil, fmt.Errorf("envFrom[%d].%s: not supported without an API server", i, src)
	}
	values := make(map[string]string, len(c.Env))
	order := make([]string, 0, len(c.Env))
	lookup := expansion.MapLookup(values)
	for i := range c.Env {
		e := &c.Env[i]
		var val string
		switch {
		case e.Value != "":
			val = expansion.Expand(e.Value, lookup)
		case e.ValueFrom != nil:
			var err error
			if val, err = envValueFrom(pod, c, e.ValueFrom, opts); err != nil {
				return nil, fmt.Errorf("env[%d] %q: %w", i, e.Name, err)
			}
		}
		if _, seen := values[e.Name]; !seen {
			order = append(order, e.Name)
		}
		values[e.Name] = val
	}
	env := make([]envVar, len(order))
	for i, name := range order {
		env[i] = envVar{name: name, value: values[name]}
	}
	return env, nil
}

func envMap(env []envVar) map[string]string {
	m := make(map[string]string, len(env))
	for _, e := range env {
		m[e.name] = e.value
	}
	return m
}

func envValueFrom(pod *v1.Pod, c *v1.Container, src *v1.EnvVarSource, opts ContainerOptions) (string, error) {
	switch {
	case src.FieldRef != nil:
		v, err := podFieldValue(pod, src.FieldRef, opts)
		if err != nil {
			return "", fmt.Errorf("valueFrom.fieldRef: %w", err)
		}
		return v, nil
	case src.ResourceFieldRef != nil:
		v, err := resourceFieldValue(pod, c, src.ResourceFieldRef, opts.NodeAllocatable)
		if err != nil {
			return "", fmt.Errorf("valueFrom.resourceFieldRef: %w", err)
		}
		return v, nil
	case src.ConfigMapKeyRef != nil:
		return "", fmt.Errorf("valueFrom.configMapKeyRef: not supported without an API server")
	case src.SecretKeyRef != nil:
		return "", fmt.Errorf("valueFrom.secretKeyRef: not supported without an API server")
	case src.FileKeyRef != nil:
		return "", fmt.Errorf("valueFrom.fileKeyRef: not supported")
	}
	return "", fmt.Errorf("valueFrom: no source set")
}

// podFieldValue resolves a downward API field reference (kubelet
// podFieldSelectorRuntimeValue plus fieldpath.ExtractFieldPathAsString).
func podFieldValue(pod *v1.Pod, ref *v1.ObjectFieldSelector, opts ContainerOptions) (string, error) {
	if ref.APIVersion != "" && ref.APIVersion != "v1" {
		return "", fmt.Errorf("unsupported apiVersion %q for fieldPath %q", ref.APIVersion, ref.FieldPath)
	}
	path := ref.FieldPath
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
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
	if base, key, ok := splitSubscript(path); ok {
		switch base {
		case "metadata.labels":
			if errs := validation.IsQualifiedName(key); len(errs) > 0 {
				return "", fmt.Errorf("invalid key subscript in %q: %s", path, strings.Join(errs, "; "))
			}
			return pod.Labels[key], nil
		case "metadata.annotations":
			if errs := validation.IsQualifiedName(strings.ToLower(key)); len(errs) > 0 {
				return "", fmt.Errorf("invalid key subscript in %q: %s", path, strings.Join(errs, "; "))
			}
			return pod.Annotations[key], nil
		}
		return "", fmt.Errorf("fieldPath %q does not support a subscript", path)
	}
	return "", fmt.Errorf("unsupported fieldPath %q", path)
}

// splitSubscript splits "metadata.labels['key']" into "metadata.labels" and
// "key".
func splitSubscript(path string) (base, key string, ok bool) {
	if !strings.HasSuffix(path, "']") {
		return "", "", false
	}
	open := strings.Index(path, "['")
	if open < 0 {
		return "", "", false
	}
	return path[:open], path[open+2 : len(path)-2], true
}

// formatMap renders labels or annotations as the downward API does: sorted
// key="value" lines.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	lines := make([]string, len(keys))
	for i, k := range keys {
		lines[i] = fmt.Sprintf("%s=%q", k, m[k])
	}
	return strings.Join(lines, "\n")
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
