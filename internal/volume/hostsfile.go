package volume

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"
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
	if err := writeFileAtomic(path, content, 0o644); err != nil {
		return "", fmt.Errorf("pod %s: writing hosts file: %w", uid, err)
	}
	return path, nil
}

// writeFileAtomic writes data to path through a temporary file in the same
// directory: write, fsync, rename, fsync the directory.
func writeFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err = tmp.Chmod(perm); err != nil {
		_ = tmp.Close()
		return err
	}
	if err = tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
