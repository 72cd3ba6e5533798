package kuberuntime

import (
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// EnvObjects are the configMaps and secrets a container's environment
// refers to (EnvReferences names them), fetched by the caller from the API
// server so that this package stays free of I/O. A name missing from its map
// was not found.
type EnvObjects struct {
	ConfigMaps map[string]*v1.ConfigMap
	Secrets    map[string]*v1.Secret
}

// EnvReferences names the configMaps and secrets that c's envFrom and
// valueFrom refer to, each once, in the order of first reference.
func EnvReferences(c *v1.Container) (configMaps, secrets []string) {
	seenCM, seenSecret := map[string]bool{}, map[string]bool{}
	addCM := func(name string) {
		if !seenCM[name] {
			seenCM[name] = true
			configMaps = append(configMaps, name)
		}
	}
	addSecret := func(name string) {
		if !seenSecret[name] {
			seenSecret[name] = true
			secrets = append(secrets, name)
		}
	}
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			addCM(from.ConfigMapRef.Name)
		case from.SecretRef != nil:
			addSecret(from.SecretRef.Name)
		}
	}
	for _, e := range c.Env {
		switch src := e.ValueFrom; {
		case src == nil:
		case src.ConfigMapKeyRef != nil:
			addCM(src.ConfigMapKeyRef.Name)
		case src.SecretKeyRef != nil:
			addSecret(src.SecretKeyRef.Name)
		}
	}
	return configMaps, secrets
}

// envFrom sets every key of one envFrom source, with its prefix. The error
// starts with the source's field name, for the caller's "envFrom[i]." .
func envFrom(from *v1.EnvFromSource, objs *EnvObjects, set func(name, val string)) error {
	var data map[string]string
	switch {
	case from.ConfigMapRef != nil:
		ref := from.ConfigMapRef
		if objs == nil {
			return fmt.Errorf("configMapRef: not supported without an API server")
		}
		cm, ok := objs.ConfigMaps[ref.Name]
		if !ok {
			if isOptional(ref.Optional) {
				return nil
			}
			return fmt.Errorf("configMapRef: configmap %q not found", ref.Name)
		}
		data = cm.Data
	case from.SecretRef != nil:
		ref := from.SecretRef
		if objs == nil {
			return fmt.Errorf("secretRef: not supported without an API server")
		}
		s, ok := objs.Secrets[ref.Name]
		if !ok {
			if isOptional(ref.Optional) {
				return nil
			}
			return fmt.Errorf("secretRef: secret %q not found", ref.Name)
		}
		data = make(map[string]string, len(s.Data))
		for k, v := range s.Data {
			data[k] = string(v)
		}
	default:
		return fmt.Errorf("no source set")
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		name := from.Prefix + k
		// The API server only admits keys and prefixes that make valid
		// names (the kubelet no longer checks them since relaxed names went
		// GA); one that could not be an environment name at all, say with
		// an '=', is skipped rather than handed to the runtime.
		if len(validation.IsRelaxedEnvVarName(name)) > 0 {
			continue
		}
		set(name, data[k])
	}
	return nil
}

// configMapKey reads one key of a configMap for valueFrom.configMapKeyRef;
// found is false when the reference is optional and the map or key absent.
func configMapKey(pod *v1.Pod, ref *v1.ConfigMapKeySelector, objs *EnvObjects) (string, bool, error) {
	if objs == nil {
		return "", false, fmt.Errorf("not supported without an API server")
	}
	optional := isOptional(ref.Optional)
	cm, ok := objs.ConfigMaps[ref.Name]
	if !ok {
		if optional {
			return "", false, nil
		}
		return "", false, fmt.Errorf("configmap %q not found", ref.Name)
	}
	// Only data, as in the kubelet: binaryData never reaches the
	// environment.
	v, ok := cm.Data[ref.Key]
	if !ok {
		if optional {
			return "", false, nil
		}
		return "", false, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, pod.Namespace, ref.Name)
	}
	return v, true, nil
}

// secretKey is configMapKey for valueFrom.secretKeyRef.
func secretKey(pod *v1.Pod, ref *v1.SecretKeySelector, objs *EnvObjects) (string, bool, error) {
	if objs == nil {
		return "", false, fmt.Errorf("not supported without an API server")
	}
	optional := isOptional(ref.Optional)
	s, ok := objs.Secrets[ref.Name]
	if !ok {
		if optional {
			return "", false, nil
		}
		return "", false, fmt.Errorf("secret %q not found", ref.Name)
	}
	v, ok := s.Data[ref.Key]
	if !ok {
		if optional {
			return "", false, nil
		}
		return "", false, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, pod.Namespace, ref.Name)
	}
	return string(v), true, nil
}

func isOptional(b *bool) bool { return b != nil && *b }
