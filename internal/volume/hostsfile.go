package volume

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/atomicfile"
)

// hostsFileName is the kubelet's name for the managed hosts file in the pod
// directory.
const hostsFileName = "etc-hosts"

// WriteHostsFile stores the pod's managed /etc/hosts (kuberuntime.HostsFile)
// as <root>/pods/<uid>/etc-hosts and returns its path. Unchanged content is
// not rewritten. A change is written to a temporary file and renamed into
// place, so a container never sees a half-written file; containers already
// running keep the version they mounted.
func (m *Manager) WriteHostsFile(uid types.UID, content []byte) (string, error) {
	if err := checkPathElement("pod UID", string(uid)); err != nil {
		return "", err
	}
	dir := m.PodDir(uid)
	path := filepath.Join(dir, hostsFileName)
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, content) {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", fmt.Errorf("pod %s: %w", uid, err)
	}
	if err := atomicfile.Write(path, content, 0o644); err != nil {
		return "", fmt.Errorf("pod %s: writing hosts file: %w", uid, err)
	}
	return path, nil
}
