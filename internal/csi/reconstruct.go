package csi

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// PublishedVolume is a pod's CSI volume found on disk.
type PublishedVolume struct {
	PodUID types.UID
	// VolumeName names the publish dir (PV name, or inline volume name).
	VolumeName string
	Data       VolData
	TargetPath string
	// Mounted: the target is a mount point now. A volume with a record but
	// no mount (a publish that failed uncertainly, or a crash mid-way)
	// still needs Unpublish before it is forgotten.
	Mounted bool
	// StagingPath is the volume's staging target where one was found.
	StagingPath string
}

// StagedVolume is a volume staged for the node, found on disk.
type StagedVolume struct {
	Data        VolData
	StagingPath string
	Mounted     bool
}

// Reconstruction is what a restart finds on disk.
type Reconstruction struct {
	Published []PublishedVolume
	Staged    []StagedVolume
	// Problems are the records that could not be read (each error names
	// its file) and the dirs berth cannot account for; the volumes they
	// hold are left alone.
	Problems []error
}

// Reconstruct lists the CSI volumes under root from their vol_data.json
// files, as the kubelet's volume manager reconstructs its actual state
// after a restart, so that the mounts found are neither staged nor
// published again, nor leaked. mounts nil is the host's mount table. Only
// a root that cannot be listed at all is an error.
func Reconstruct(root string, mounts MountChecker) (Reconstruction, error) {
	if mounts == nil {
		mounts = MountTable{}
	}
	var r Reconstruction
	if err := r.staged(root, mounts); err != nil {
		return Reconstruction{}, err
	}
	if err := r.published(root, mounts); err != nil {
		return Reconstruction{}, err
	}
	staged := map[[2]string]string{}
	for _, s := range r.Staged {
		staged[[2]string{s.Data.DriverName, s.Data.VolumeHandle}] = s.StagingPath
	}
	for i, p := range r.Published {
		r.Published[i].StagingPath = staged[[2]string{p.Data.DriverName, p.Data.VolumeHandle}]
	}
	return r, nil
}

// subdirs lists the dirs in dir; a dir that is not there has none.
func subdirs(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// staged reads plugins/kubernetes.io/csi/<driver>/<sha>/vol_data.json.
func (r *Reconstruction) staged(root string, mounts MountChecker) error {
	base := filepath.Join(root, "plugins", PluginName)
	drivers, err := subdirs(base)
	if err != nil {
		return fmt.Errorf("listing staged CSI volumes: %w", err)
	}
	for _, driver := range drivers {
		if driver == "volumeDevices" { // the kubelet's block volumes: not berth's
			continue
		}
		vols, err := subdirs(filepath.Join(base, driver))
		if err != nil {
			r.Problems = append(r.Problems, fmt.Errorf("listing staged volumes of CSI driver %q: %w", driver, err))
			continue
		}
		for _, sha := range vols {
			dir := filepath.Join(base, driver, sha)
			v, err := readStaged(dir, driver, sha, mounts)
			if err != nil {
				r.Problems = append(r.Problems, err)
				continue
			}
			r.Staged = append(r.Staged, v)
		}
	}
	return nil
}

func readStaged(dir, driver, sha string, mounts MountChecker) (StagedVolume, error) {
	file := filepath.Join(dir, volDataFileName)
	d, err := readVolData(file)
	if err != nil {
		return StagedVolume{}, fmt.Errorf("staged CSI volume at %s: %w", dir, err)
	}
	if d.DriverName != driver || fmt.Sprintf("%x", sha256.Sum256([]byte(d.VolumeHandle))) != sha {
		return StagedVolume{}, fmt.Errorf("volume data file %s: records volume %q of driver %q, which does not belong in this dir",
			file, d.VolumeHandle, d.DriverName)
	}
	tgt := filepath.Join(dir, globalMountDir)
	mounted, err := mounts.IsMountPoint(tgt)
	if err != nil {
		return StagedVolume{}, fmt.Errorf("staged CSI volume at %s: %w", dir, err)
	}
	return StagedVolume{Data: d, StagingPath: tgt, Mounted: mounted}, nil
}

// published reads pods/<uid>/volumes/kubernetes.io~csi/<name>/vol_data.json.
func (r *Reconstruction) published(root string, mounts MountChecker) error {
	pods, err := subdirs(filepath.Join(root, "pods"))
	if err != nil {
		return fmt.Errorf("listing pods' CSI volumes: %w", err)
	}
	for _, uid := range pods {
		base := filepath.Join(root, "pods", uid, "volumes", escapedPluginName)
		names, err := subdirs(base)
		if err != nil {
			r.Problems = append(r.Problems, fmt.Errorf("listing CSI volumes of pod %s: %w", uid, err))
			continue
		}
		for _, name := range names {
			v, err := readPublished(filepath.Join(base, name), types.UID(uid), unescapeQualifiedName(name), mounts)
			if err != nil {
				r.Problems = append(r.Problems, err)
				continue
			}
			r.Published = append(r.Published, v)
		}
	}
	slices.SortFunc(r.Published, func(a, b PublishedVolume) int {
		return strings.Compare(string(a.PodUID)+"/"+a.VolumeName, string(b.PodUID)+"/"+b.VolumeName)
	})
	return nil
}

func readPublished(dir string, uid types.UID, name string, mounts MountChecker) (PublishedVolume, error) {
	tgt := filepath.Join(dir, publishMountDir)
	mounted, err := mounts.IsMountPoint(tgt)
	if err != nil {
		return PublishedVolume{}, fmt.Errorf("CSI volume %q of pod %s at %s: %w", name, uid, dir, err)
	}
	d, err := readVolData(filepath.Join(dir, volDataFileName))
	if err != nil {
		state := "not mounted"
		if mounted {
			state = "mounted"
		}
		return PublishedVolume{}, fmt.Errorf("CSI volume %q of pod %s (%s): %w", name, uid, state, err)
	}
	return PublishedVolume{PodUID: uid, VolumeName: name, Data: d, TargetPath: tgt, Mounted: mounted}, nil
}
