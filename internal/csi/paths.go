package csi

import (
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

const (
	// PluginName is the kubelet's name of its CSI volume plugin.
	PluginName = "kubernetes.io/csi"
	// escapedPluginName is PluginName as a directory name under a pod.
	escapedPluginName = "kubernetes.io~csi"
	volDataFileName   = "vol_data.json"
	globalMountDir    = "globalmount"
	publishMountDir   = "mount"
)

// escapeQualifiedName makes a qualified name (a/b) a single path element,
// as the kubelet's utilstrings.EscapeQualifiedName.
func escapeQualifiedName(s string) string {
	return strings.ReplaceAll(s, "/", "~")
}

// unescapeQualifiedName is escapeQualifiedName's inverse.
func unescapeQualifiedName(s string) string {
	return strings.ReplaceAll(s, "~", "/")
}

// StagingDir is <root>/plugins/kubernetes.io/csi/<driver>/<sha256 of the
// volume handle>, which holds the staging target and its vol_data.json.
func StagingDir(root, driver, volumeHandle string) string {
	sum := sha256.Sum256([]byte(volumeHandle))
	return filepath.Join(root, "plugins", PluginName, driver, fmt.Sprintf("%x", sum))
}

// StagingPath is the staging target passed to NodeStageVolume and
// NodePublishVolume: StagingDir/globalmount.
func StagingPath(root, driver, volumeHandle string) string {
	return filepath.Join(StagingDir(root, driver, volumeHandle), globalMountDir)
}

// PublishDir is <root>/pods/<uid>/volumes/kubernetes.io~csi/<volume name>,
// which holds the publish target and its vol_data.json. The volume name is
// the PersistentVolume's name for a PVC-backed volume and the pod's volume
// name for an inline (ephemeral) one, as in the kubelet.
func PublishDir(root string, podUID types.UID, volumeName string) string {
	return filepath.Join(root, "pods", string(podUID), "volumes", escapedPluginName, escapeQualifiedName(volumeName))
}

// PublishPath is the target passed to NodePublishVolume: PublishDir/mount.
func PublishPath(root string, podUID types.UID, volumeName string) string {
	return filepath.Join(PublishDir(root, podUID, volumeName), publishMountDir)
}

// EphemeralVolumeHandle is the handle the kubelet gives an inline CSI
// volume: csi-<sha256 of pod UID and volume name>.
func EphemeralVolumeHandle(podUID types.UID, volumeName string) string {
	sum := sha256.Sum256([]byte(string(podUID) + volumeName))
	return fmt.Sprintf("csi-%x", sum)
}

// attachmentName is the VolumeAttachment's name for a volume on a node:
// csi-<sha256 of handle, driver and node>, recorded in vol_data.json.
func attachmentName(volumeHandle, driver, nodeName string) string {
	sum := sha256.Sum256([]byte(volumeHandle + driver + nodeName))
	return fmt.Sprintf("csi-%x", sum)
}

// checkPathName refuses a name that cannot be one element of a path under
// the root (empty, ".", "..", or holding a "/" or a NUL), so that no
// driver, pod or volume name reaches outside its dir.
func checkPathName(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("no %s", what)
	case s == "." || s == ".." || strings.ContainsAny(s, "/\x00"):
		return fmt.Errorf("%s %q cannot be a directory name", what, s)
	}
	return nil
}
