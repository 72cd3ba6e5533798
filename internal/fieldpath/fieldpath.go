// Package fieldpath resolves the downward API's references to a pod's own
// fields and to its containers' resources, for environment variables
// (kuberuntime) and downwardAPI volume files (volume) alike. It follows the
// kubelet's pkg/fieldpath and pkg/api/v1/resource helpers.
package fieldpath

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ExtractFieldPathAsString resolves a metadata field path of pod:
// metadata.name, namespace, uid, labels and annotations, whole or one key
// ("metadata.labels['app']"). These are the fields a downwardAPI volume may
// project; environment variables add spec.* and status.* fields on top,
// which only the caller knows how to answer.
func ExtractFieldPathAsString(pod *v1.Pod, fieldPath string) (string, error) {
	if base, key, ok := SplitMaybeSubscriptedPath(fieldPath); ok {
		switch base {
		case "metadata.labels":
			if errs := validation.IsQualifiedName(key); len(errs) > 0 {
				return "", fmt.Errorf("invalid key subscript in %q: %s", fieldPath, strings.Join(errs, "; "))
			}
			return pod.Labels[key], nil
		case "metadata.annotations":
			// Annotation keys may have upper case letters; the kubelet
			// checks their lower-case form.
			if errs := validation.IsQualifiedName(strings.ToLower(key)); len(errs) > 0 {
				return "", fmt.Errorf("invalid key subscript in %q: %s", fieldPath, strings.Join(errs, "; "))
			}
			return pod.Annotations[key], nil
		}
		return "", fmt.Errorf("fieldPath %q does not support a subscript", fieldPath)
	}
	switch fieldPath {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return FormatMap(pod.Labels), nil
	case "metadata.annotations":
		return FormatMap(pod.Annotations), nil
	}
	return "", fmt.Errorf("unsupported fieldPath %q", fieldPath)
}

// SplitMaybeSubscriptedPath splits "metadata.labels['key']" into
// "metadata.labels" and "key"; ok is false for a path without a subscript.
func SplitMaybeSubscriptedPath(fieldPath string) (base, key string, ok bool) {
	if !strings.HasSuffix(fieldPath, "']") {
		return fieldPath, "", false
	}
	open := strings.Index(fieldPath, "['")
	if open <= 0 {
		return fieldPath, "", false
	}
	return fieldPath[:open], fieldPath[open+2 : len(fieldPath)-2], true
}

// FormatMap renders labels or annotations as the downward API does: one
// key="value" line per key, sorted by key, the value quoted as Go quotes it.
func FormatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(m[k]))
	}
	return b.String()
}
