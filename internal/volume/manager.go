package volume

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// emptyDirPluginDir is the kubelet's directory name for emptyDir volumes, so
// that tools which know the kubelet's layout find them.
const emptyDirPluginDir = "kubernetes.io~empty-dir"

// Manager prepares and tears down pod volumes under <rootDir>/pods/<uid>/. It
// keeps no state of its own: everything is derived from the pod and the
// filesystem, so it survives a restart of berth. Calls for different pods may
// run concurrently; calls for one pod must not.
type Manager struct {
	rootDir string
	mounter Mounter
	log     *slog.Logger
}

// NewManager returns a Manager rooted at rootDir (berth's root directory).
func NewManager(rootDir string, mounter Mounter, log *slog.Logger) *Manager {
	return &Manager{rootDir: rootDir, mounter: mounter, log: log}
}

// PodDir is <root>/pods/<uid>.
func (m *Manager) PodDir(uid types.UID) string {
	return filepath.Join(m.rootDir, "pods", string(uid))
}

// ContainerDir is <root>/pods/<uid>/containers/<name>, where per-container
// files such as the termination message live.
func (m *Manager) ContainerDir(uid types.UID, name string) string {
	return filepath.Join(m.PodDir(uid), "containers", name)
}

func (m *Manager) emptyDirRoot(uid types.UID) string {
	return filepath.Join(m.PodDir(uid), "volumes", emptyDirPluginDir)
}

// Setup creates every volume of the pod and returns the host path of each, by
// volume name. It is idempotent: an emptyDir or hostPath already in place is
// left as it is, and the volumes written from the API (configMap, secret,
// downwardAPI, projected) are brought up to date, so it runs on every sync
// of the pod. Every volume is tried even when one fails, so that one that
// cannot be set up does not keep the others stale; the error names each
// volume that failed.
func (m *Manager) Setup(ctx context.Context, pod *v1.Pod, opts SetupOptions) (map[string]string, error) {
	if err := checkPathElement("metadata.uid", string(pod.UID)); err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	for _, dir := range []string{m.PodDir(pod.UID), filepath.Join(m.PodDir(pod.UID), "volumes")} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("pod %s/%s: creating %s: %w", pod.Namespace, pod.Name, dir, err)
		}
	}
	paths := make(map[string]string, len(pod.Spec.Volumes))
	var errs []error
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		p, err := m.setupVolume(ctx, pod, vol, opts)
		if err != nil {
			errs = append(errs, fmt.Errorf("volume %q: %w", vol.Name, err))
			continue
		}
		paths[vol.Name] = p
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return paths, nil
}

func (m *Manager) setupVolume(ctx context.Context, pod *v1.Pod, vol *v1.Volume, opts SetupOptions) (string, error) {
	if err := checkPathElement("name", vol.Name); err != nil {
		return "", err
	}
	switch src := &vol.VolumeSource; {
	case src.EmptyDir != nil:
		return m.setupEmptyDir(pod, vol.Name, src.EmptyDir)
	case src.HostPath != nil:
		return setupHostPath(src.HostPath)
	case src.ConfigMap != nil:
		return m.setupConfigMap(ctx, pod, vol.Name, src.ConfigMap, opts)
	case src.Secret != nil:
		return m.setupSecret(ctx, pod, vol.Name, src.Secret, opts)
	case src.DownwardAPI != nil:
		return m.setupDownwardAPI(pod, vol.Name, src.DownwardAPI, opts)
	case src.Projected != nil:
		return m.setupProjected(ctx, pod, vol.Name, src.Projected, opts)
	case src.Image != nil:
		// The runtime mounts the image itself (CRI Mount.image): there is
		// nothing on the host to prepare, and no host path.
		return "", nil
	}
	return "", fmt.Errorf("volume source %s is not supported (berth supports emptyDir, hostPath, configMap, secret, downwardAPI and projected)", sourceKind(vol.VolumeSource))
}

// sourceKind names the volume's source field(s) as they appear in a manifest,
// e.g. "configMap".
func sourceKind(src v1.VolumeSource) string {
	data, err := json.Marshal(src)
	if err != nil {
		return "(unknown)"
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil || len(fields) == 0 {
		return "(none)"
	}
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// checkPathElement refuses a name that would not be a single path element,
// since UIDs and volume names become directory names and TearDown removes
// what they point to.
func checkPathElement(field, name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("%s %q cannot be used as a directory name", field, name)
	}
	return nil
}

// TearDown unmounts the pod's tmpfs volumes (emptyDir medium Memory,
// secret, projected) and removes <root>/pods/<uid> entirely. hostPath
// volumes are never touched. It refuses to remove anything while a mount is
// left under the pod directory, so that it can never delete through a mount
// into data that is not the pod's. A pod with no directory is already torn
// down.
func (m *Manager) TearDown(uid types.UID) error {
	if err := checkPathElement("pod UID", string(uid)); err != nil {
		return err
	}
	podDir := m.PodDir(uid)
	if _, err := os.Lstat(podDir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	// Every volume is <pod>/volumes/<plugin>/<name>: whichever plugin made
	// it, a volume that is a mount point is unmounted.
	volumesDir := filepath.Join(podDir, "volumes")
	plugins, err := os.ReadDir(volumesDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("pod %s: listing volumes: %w", uid, err)
	}
	for _, plugin := range plugins {
		if !plugin.IsDir() {
			continue
		}
		if err := m.unmountVolumes(uid, filepath.Join(volumesDir, plugin.Name())); err != nil {
			return err
		}
	}
	if err := m.checkNoMounts(podDir); err != nil {
		return fmt.Errorf("pod %s: %w", uid, err)
	}
	if err := os.RemoveAll(podDir); err != nil {
		return fmt.Errorf("pod %s: removing %s: %w", uid, podDir, err)
	}
	m.log.Debug("removed pod directory", "podUID", uid, "path", podDir)
	return nil
}

// Housekeep tears down the directory of every pod under <root>/pods that
// wanted(uid) says is gone: the kubelet's cleanupOrphanedPodDirs. A pod's
// own teardown removes its directory as it stops; what is left is a pod
// berth lost track of (killed while it stopped, a record set aside), whose
// directory nothing else would ever remove. It returns the UIDs whose
// directories it removed.
func (m *Manager) Housekeep(wanted func(types.UID) bool) ([]types.UID, error) {
	entries, err := os.ReadDir(filepath.Join(m.rootDir, "pods"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing pod directories: %w", err)
	}
	var removed []types.UID
	var errs []error
	for _, e := range entries {
		uid := types.UID(e.Name())
		if !e.IsDir() || checkPathElement("pod UID", e.Name()) != nil || wanted(uid) {
			continue
		}
		if err := m.TearDown(uid); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, uid)
	}
	return removed, errors.Join(errs...)
}

// unmountVolumes unmounts the volumes of one plugin directory that are
// mount points.
func (m *Manager) unmountVolumes(uid types.UID, pluginDir string) error {
	entries, err := os.ReadDir(pluginDir)
	if err != nil {
		return fmt.Errorf("pod %s: listing %s: %w", uid, pluginDir, err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(pluginDir, e.Name())
		mounted, err := m.mounter.IsMountPoint(dir)
		if err != nil {
			return fmt.Errorf("pod %s: %w", uid, err)
		}
		if !mounted {
			continue
		}
		if err := m.mounter.Unmount(dir); err != nil {
			return fmt.Errorf("pod %s: volume %q: %w", uid, e.Name(), err)
		}
		m.log.Info("unmounted tmpfs volume", "podUID", uid, "volume", e.Name(), "path", dir)
	}
	return nil
}

// checkNoMounts walks dir, without following symlinks, and fails on the
// first directory that is a mount point; it does not descend into it.
func (m *Manager) checkNoMounts(dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		mounted, err := m.mounter.IsMountPoint(path)
		if err != nil {
			return err
		}
		if mounted {
			return fmt.Errorf("refusing to remove %s: %s is still a mount point", dir, path)
		}
		return nil
	})
}
