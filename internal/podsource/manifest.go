package podsource

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// result is what one document of a manifest became: a pod, or an error.
type result struct {
	pod   *v1.Pod
	err   ManifestError // when pod is nil
	index int           // among the file's non-empty documents
	line  int           // the document's first line of content
}

// readManifest turns one file into pods and errors, document by document.
// A file that vanished while being read yields nothing: the scan that
// follows its removal will not see it either.
func readManifest(path, nodeName string) []result {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return []result{{err: fileError(path, nodeName, err)}}
	}
	var results []result
	for _, doc := range splitDocuments(data) {
		pod, merr := staticPod(doc, path, nodeName)
		if pod == nil && merr == nil {
			continue // an empty document
		}
		r := result{pod: pod, index: len(results), line: doc.contentLine()}
		if merr != nil {
			r.err = *merr
			r.err.Index = r.index
		}
		results = append(results, r)
	}
	return results
}

// location names a document the way ManifestError.Error does.
func location(path string, index, line int) string {
	if index > 0 && line > 0 {
		return fmt.Sprintf("%s:%d", path, line)
	}
	return path
}

// staticPod takes one document through decoding, the static identity,
// defaulting and validation. Both results are nil for an empty document.
func staticPod(doc document, path, nodeName string) (*v1.Pod, *ManifestError) {
	pod, h, err := decodeDocument(doc)
	fail := func(err error) *ManifestError {
		e := fileError(path, nodeName, err)
		e.Line = doc.contentLine()
		if h.Namespace != "" {
			e.Namespace = h.Namespace
		}
		if h.Name != "" {
			e.Name = staticPodName(h.Name, nodeName)
		}
		return &e
	}
	if err != nil {
		return nil, fail(err)
	}
	if pod == nil {
		return nil, nil
	}
	// Status in a manifest (say, saved with kubectl get -o yaml) means
	// nothing to the node and must not change the UID.
	pod.Status = v1.PodStatus{}
	uid, err := staticPodUID(pod, path, nodeName)
	if err != nil {
		return nil, fail(err)
	}
	SetDefaults(pod)
	applyStaticIdentity(pod, uid, nodeName)
	if errs := Validate(pod); len(errs) > 0 {
		return nil, fail(FieldErrors(errs))
	}
	return pod, nil
}

// fileError is an error about a whole file, named after the file until the
// document says better. The name keeps the file's extension: web.yaml and
// web.json, both unreadable, are two reports, not one.
func fileError(path, nodeName string, err error) ManifestError {
	base := strings.ToLower(filepath.Base(path))
	return ManifestError{
		Path:      path,
		Namespace: metav1.NamespaceDefault,
		Name:      staticPodName(base, nodeName),
		Err:       err,
	}
}

// duplicateError refuses a pod whose namespace/name an earlier manifest
// already took.
func duplicateError(pod *v1.Pod, first string) FieldErrors {
	e := field.Duplicate(field.NewPath("metadata", "name"), pod.Name)
	e.Detail = fmt.Sprintf("pod %s/%s is already defined in %s", pod.Namespace, pod.Name, first)
	return FieldErrors{e}
}
