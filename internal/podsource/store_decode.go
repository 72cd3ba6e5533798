package podsource

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The kubelet's annotations that only a node sets: a pod that carried them
// from a saved copy (berth pods -o yaml) is not the pod they were set for.
const (
	configMirrorAnnotationKey = "kubernetes.io/config.mirror"
	configSeenAnnotationKey   = "kubernetes.io/config.seen"
)

// APIDocument is one document of a request to berth's local API: a pod ready
// for Store.Apply, or why not.
type APIDocument struct {
	// Pod is defaulted and validated, with the API source's identity but no
	// UID yet (the Store gives one); nil when Err is set.
	Pod *v1.Pod
	// Err is FieldErrors when fields are invalid, another error when the
	// document is no pod at all (YAML syntax, an unknown or duplicated
	// field, not a mapping).
	Err error
	// Namespace and Name name the pod, best effort when Err is set.
	Namespace, Name string
	// Line is the document's first line of content in the request, 1-based.
	Line int
}

// DecodeAPIPods turns a request body (YAML or JSON, documents separated by
// "---") into pods through the same steps as a manifest (strict decoding,
// defaulting, validation), with the API server's identity instead of the
// static one: the name is kept, the
// namespace defaults to "default", the config.source annotation is "api",
// and what the API server sets itself on create (uid, resourceVersion,
// creationTimestamp, status) is dropped. Empty documents are skipped. It is
// pure.
func DecodeAPIPods(data []byte, nodeName string) []APIDocument {
	var out []APIDocument
	first := map[string]int{} // namespace/name → line of the document that defined it
	for _, doc := range splitDocuments(data) {
		pod, h, err := decodeDocument(doc)
		if pod == nil && err == nil {
			continue
		}
		d := APIDocument{Namespace: h.Namespace, Name: h.Name, Line: doc.contentLine()}
		if d.Namespace == "" {
			d.Namespace = metav1.NamespaceDefault
		}
		if err == nil {
			if errs := makeAPIPod(pod, nodeName); len(errs) > 0 {
				err = FieldErrors(errs)
			}
		}
		if err == nil {
			k := pod.Namespace + "/" + pod.Name
			if line, taken := first[k]; taken {
				dup := field.Duplicate(field.NewPath("metadata", "name"), pod.Name)
				dup.Detail = fmt.Sprintf("pod %s is already defined by the document at line %d", k, line)
				err = FieldErrors{dup}
			} else {
				first[k] = d.Line
			}
		}
		if err != nil {
			d.Err = err
		} else {
			d.Pod = pod
		}
		out = append(out, d)
	}
	return out
}

// makeAPIPod gives a decoded pod the API source's identity, defaults and
// validates it.
func makeAPIPod(pod *v1.Pod, nodeName string) field.ErrorList {
	errs := validateAPIRequest(pod, nodeName)
	clearServerFields(pod)
	SetDefaults(pod)
	applyAPIIdentity(pod, nodeName)
	errs = append(errs, Validate(pod)...)
	return append(errs, validateStoreName(pod)...)
}

// validateAPIRequest refuses what a pod sent to this node cannot ask for:
// another node, or the mirror annotation, which would make it critical.
func validateAPIRequest(pod *v1.Pod, nodeName string) field.ErrorList {
	var errs field.ErrorList
	if n := pod.Spec.NodeName; n != "" && n != nodeName {
		errs = append(errs, field.Invalid(field.NewPath("spec", "nodeName"), n,
			fmt.Sprintf("berth runs pods on node %q only", nodeName)))
	}
	if _, ok := pod.Annotations[configMirrorAnnotationKey]; ok {
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "annotations").Key(configMirrorAnnotationKey),
			"only a node sets it, on the API server's copy of a static pod"))
	}
	return errs
}

// clearServerFields drops what the API server sets itself when it creates a
// pod, and the node's own bookkeeping, so that a pod saved with
// `berth pods -o yaml` applies as the same pod it was.
func clearServerFields(pod *v1.Pod) {
	m := &pod.ObjectMeta
	m.UID = ""
	m.ResourceVersion = ""
	m.Generation = 0
	m.CreationTimestamp = metav1.Time{}
	m.DeletionTimestamp = nil
	m.DeletionGracePeriodSeconds = nil
	m.ManagedFields = nil
	m.SelfLink = ""
	delete(m.Annotations, ConfigHashAnnotationKey)
	delete(m.Annotations, configSeenAnnotationKey)
	pod.Status = v1.PodStatus{}
}

// applyAPIIdentity makes the pod one the API server bound to this node.
// Unlike a static pod it keeps its name and tolerates no taint it did not
// ask for.
func applyAPIIdentity(pod *v1.Pod, nodeName string) {
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	pod.Spec.NodeName = nodeName
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[ConfigSourceAnnotationKey] = ApiserverSource
	pod.Status = v1.PodStatus{Phase: v1.PodPending}
}

// maxFileName is the longest file name Linux file systems take (NAME_MAX).
const maxFileName = 255

// validateStoreName refuses a name too long for the store's file name,
// which the API server would take: its limit is the name's alone.
func validateStoreName(pod *v1.Pod) field.ErrorList {
	maxLen := maxFileName - len(storeFileName(pod.Namespace, ""))
	if len(pod.Name) <= maxLen {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), pod.Name, fmt.Sprintf(
		"must be no more than %d characters in namespace %q: berth stores the pod in a file named <namespace>_<name>.json",
		maxLen, pod.Namespace))}
}
