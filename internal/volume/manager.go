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
	// csi sets up the CSI-backed volumes; nil on a standalone node, which
	// has no API server to read their claims from.
	csi CSIVolumes
}

// CSIVolumes sets up and tears down the volumes a CSI driver mounts
// (persistentVolumeClaim, ephemeral and csi): *csi.PodVolumes. Their state
// is on disk, under the pod's directory and the root's plugins directory.
type CSIVolumes interface {
	SetUp(ctx context.Context, pod *v1.Pod, vol *v1.Volume) (string, error)
	TearDownPod(ctx context.Context, uid types.UID) error
}

// SetCSI gives the Manager the CSI volumes of a cluster node; it is called
// once, before the Manager is used.
func (m *Manager) SetCSI(c CSIVolumes) { m.csi = c }

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
	case src.PersistentVolumeClaim != nil, src.Ephemeral != nil, src.CSI != nil:
		if m.csi == nil {
			return "", errNeedsAPIServer(sourceKind(vol.VolumeSource))
		}
		return m.csi.SetUp(ctx, pod, vol)
	}
	return "", fmt.Errorf("volume source %s is not supported (berth supports emptyDir, hostPath, configMap, secret, downwardAPI, projected, persistentVolumeClaim, ephemeral and csi)", sourceKind(vol.VolumeSource))
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

// TearDown unpublishes the pod's CSI volumes, unmounts its tmpfs volumes
// (emptyDir medium Memory, secret, projected) and removes <root>/pods/<uid>
// entirely. hostPath volumes are never touched. It refuses to remove
// anything while a mount is left under the pod directory, so that it can
// never delete through a mount into data that is not the pod's. A pod with
// no directory is already torn down.
func (m *Manager) TearDown(ctx context.Context, uid types.UID) error {
	if err := checkPathElement("pod UID", string(uid)); err != nil {
		return err
	}
	podDir := m.PodDir(uid)
	if _, err := os.Lstat(podDir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if m.csi != nil {
		if err := m.csi.TearDownPod(ctx, uid); err != nil {
			return fmt.Errorf("pod %s: %w", uid, err)
		}
	} else if has, err := m.hasCSIVolumes(uid); err != nil || has {
		// Their records would go with the directory, and their mounts, if
		// the drivers made any, would leak.
		return fmt.Errorf("pod %s: it has CSI volumes, and this node cannot unpublish them (no API server): %v", uid, err)
	}
	return m.removePodDir(uid, podDir)
}

// hasCSIVolumes says whether the pod has CSI volumes on disk, published or
// recorded.
func (m *Manager) hasCSIVolumes(uid types.UID) (bool, error) {
	ents, err := os.ReadDir(filepath.Join(m.PodDir(uid), "volumes", csiPluginDir))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return len(ents) > 0, err
}

// csiPluginDir is the kubelet's directory name of CSI volumes under a pod.
const csiPluginDir = "kubernetes.io~csi"

// removePodDir unmounts the pod's tmpfs volumes and removes its directory.
func (m *Manager) removePodDir(uid types.UID, podDir string) error {
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
// directories it removed. A pod with CSI volumes is left to the CSI
// housekeeping (csi.PodVolumes.Housekeep), which calls drivers and so runs
// off the caller's loop; its directory goes in a later pass, once they are
// unpublished.
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
		if has, err := m.hasCSIVolumes(uid); err != nil || has {
			if err != nil {
				errs = append(errs, fmt.Errorf("pod %s: %w", uid, err))
			}
			continue
		}
		if err := m.removePodDir(uid, m.PodDir(uid)); err != nil {
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
