package podsource

import (
	"fmt"
	"maps"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Snapshot is the complete desired set of pods from one source at one moment.
// The receiver owns it: every scan builds new pods.
type Snapshot struct {
	Pods   []*v1.Pod       // valid pods, sorted by namespace/name, each fully defaulted
	Errors []ManifestError // one per broken file or broken document, in file order
	// Incomplete is set while a source has not reported yet (the API
	// server before its first list): a pod missing from the snapshot may
	// still be wanted, so nothing is killed for being absent.
	Incomplete bool
}

// Equal reports whether two snapshots ask for the same pods and report the
// same errors. A static pod's UID covers its file, node and content, so
// comparing UIDs compares everything a manifest can change; an API server's
// pod keeps its UID, and its content is compared.
func (s Snapshot) Equal(o Snapshot) bool {
	if len(s.Pods) != len(o.Pods) || len(s.Errors) != len(o.Errors) || s.Incomplete != o.Incomplete {
		return false
	}
	for i := range s.Pods {
		a, b := s.Pods[i], o.Pods[i]
		if a.UID != b.UID || a.Namespace != b.Namespace || a.Name != b.Name || !SameContent(a, b) {
			return false
		}
	}
	for i := range s.Errors {
		if s.Errors[i].Error() != o.Errors[i].Error() {
			return false
		}
	}
	return true
}

// ManifestError is a manifest that could not become a pod. It names the file,
// the field and the reason.
type ManifestError struct {
	Path      string // file path
	Index     int    // document index within the file (0-based, empty documents not counted)
	Line      int    // first line of the document in the file (1-based), 0 when unknown
	Namespace string // best effort: from the document if it parsed far enough, else "default"
	Name      string // best effort: "<name>-<nodeName>" if metadata.name parsed, else derived from the file base name
	Err       error  // names the field and the reason, e.g. `spec.containers[1].name: Duplicate value: "web"`
}

// Error reads "<path>: <field>: <reason>". For the second and later
// documents of a file the path carries the document's first line
// ("<path>:<line>: ..."), so the reader finds the right document.
func (e ManifestError) Error() string {
	if e.Index > 0 && e.Line > 0 {
		return fmt.Sprintf("%s:%d: %v", e.Path, e.Line, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Path, e.Err)
}

func (e ManifestError) Unwrap() error { return e.Err }

// FieldErrors is a failed validation as an error, worded as the API server
// words it ("[a, b]" for several); errors.As recovers the list.
type FieldErrors field.ErrorList

func (l FieldErrors) Error() string { return field.ErrorList(l).ToAggregate().Error() }

func (l FieldErrors) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// SameContent reports whether two versions of a pod ask the same of the
// node: spec, labels, annotations, deletion and the readiness gates'
// conditions. A change of status alone (berth's own status patches come
// back through the informer) is none; a gate's condition, set by someone
// else, decides the pod's Ready.
func SameContent(a, b *v1.Pod) bool {
	if a.ResourceVersion == b.ResourceVersion {
		return true
	}
	return apiequality.Semantic.DeepEqual(a.Spec, b.Spec) &&
		maps.Equal(a.Labels, b.Labels) && maps.Equal(a.Annotations, b.Annotations) &&
		a.DeletionTimestamp.Equal(b.DeletionTimestamp) &&
		apiequality.Semantic.DeepEqual(a.DeletionGracePeriodSeconds, b.DeletionGracePeriodSeconds) &&
		sameGates(a, b)
}

// sameGates reports whether the conditions a's readiness gates name have
// the same status in a and b.
func sameGates(a, b *v1.Pod) bool {
	for _, g := range a.Spec.ReadinessGates {
		if gateStatus(a, g.ConditionType) != gateStatus(b, g.ConditionType) {
			return false
		}
	}
	return true
}

func gateStatus(pod *v1.Pod, t v1.PodConditionType) v1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}
