package podsource

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	sigsjson "sigs.k8s.io/json"
)

const (
	// storeFileExt ends every store file; other names are not the store's.
	storeFileExt = ".json"
	// checksumPrefix names the hash of a record's checksum.
	checksumPrefix = "sha256:"
	// forgottenSuffix ends the name of a quarantined file once the user
	// acted on its pod (applied or deleted the name): it is evidence still,
	// but no longer reported.
	forgottenSuffix = ".forgotten"
)

// record is one store file. The checksum covers the pod's compact JSON, so
// the file may be indented for people to read, while a truncated, damaged
// or hand-edited file is caught before it is trusted.
type record struct {
	Checksum string          `json:"checksum"`
	Pod      json.RawMessage `json:"pod"`
}

// storeFileName is the file of one pod. A namespace is a DNS label and a name
// a DNS subdomain: neither holds "_" or "/", so the name cannot clash or
// escape the directory.
func storeFileName(namespace, name string) string {
	return namespace + "_" + name + storeFileExt
}

// parseStoreFileName is storeFileName's inverse; ok is false for a name the
// store would never write.
func parseStoreFileName(file string) (namespace, name string, ok bool) {
	base, ok := strings.CutSuffix(file, storeFileExt)
	if !ok {
		return "", "", false
	}
	namespace, name, ok = strings.Cut(base, "_")
	return namespace, name, ok && namespace != "" && name != ""
}

// encodeRecord returns the file content for a stored pod.
func encodeRecord(pod *v1.Pod) ([]byte, error) {
	podJSON, err := json.Marshal(pod)
	if err != nil {
		return nil, fmt.Errorf("encoding pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	data, err := json.MarshalIndent(record{Checksum: checksum(podJSON), Pod: podJSON}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return append(data, '\n'), nil
}

func checksum(compactJSON []byte) string {
	sum := sha256.Sum256(compactJSON)
	return checksumPrefix + hex.EncodeToString(sum[:])
}

// decodeRecord verifies a store file and returns its pod, defaulted again
// (a newer berth may know more defaults; the UID stays, so the pod is not
// restarted) and bound to nodeName. The file is trusted only if its checksum
// holds, it decodes strictly, it names the pod its file name says, it
// carries a UID and the API source, and the pod passes validation.
func decodeRecord(data []byte, namespace, name, nodeName string) (*v1.Pod, error) {
	var rec record
	if err := unmarshalStrict(data, &rec); err != nil {
		return nil, err
	}
	if rec.Checksum == "" || len(rec.Pod) == 0 {
		return nil, errors.New("not a pod record: checksum and pod are required")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, rec.Pod); err != nil {
		return nil, fmt.Errorf("pod: %w", err)
	}
	if got := checksum(compact.Bytes()); got != rec.Checksum {
		return nil, fmt.Errorf("checksum mismatch: the file says %s, its pod hashes to %s", rec.Checksum, got)
	}
	pod := &v1.Pod{}
	if err := unmarshalStrict(rec.Pod, pod); err != nil {
		return nil, fmt.Errorf("pod: %w", err)
	}
	switch {
	case pod.Namespace != namespace || pod.Name != name:
		return nil, fmt.Errorf("the file holds pod %s/%s, its name says %s/%s", pod.Namespace, pod.Name, namespace, name)
	case pod.UID == "":
		return nil, errors.New("metadata.uid: Required value")
	case pod.Annotations[ConfigSourceAnnotationKey] != ApiserverSource:
		return nil, fmt.Errorf("metadata.annotations[%s]: must be %q", ConfigSourceAnnotationKey, ApiserverSource)
	}
	SetDefaults(pod)
	pod.Spec.NodeName = nodeName
	errs := validateAPIRequest(pod, nodeName)
	if errs = append(errs, Validate(pod)...); len(errs) > 0 {
		return nil, FieldErrors(errs)
	}
	return pod, nil
}

// unmarshalStrict decodes JSON refusing unknown and duplicated fields.
func unmarshalStrict(data []byte, v any) error {
	strict, err := sigsjson.UnmarshalStrict(data, v, sigsjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	if len(strict) > 0 {
		return utilerrors.NewAggregate(strict)
	}
	return nil
}

// removeFile removes path durably: once it returns, a crash cannot bring
// the file back. A file already gone is no error.
func removeFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
