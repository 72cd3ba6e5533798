package csi

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/moby/sys/mountinfo"

	"github.com/berth-dev/berth/internal/atomicfile"
)

// MountChecker tells whether a path is a mount point: the only thing berth
// asks of the mount table here, since the drivers do the mounting.
type MountChecker interface {
	// IsMountPoint is false, without error, for a path that does not exist.
	IsMountPoint(path string) (bool, error)
}

// MountTable is the MountChecker of this host's mount table.
type MountTable struct{}

func (MountTable) IsMountPoint(path string) (bool, error) {
	ok, err := mountinfo.Mounted(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return ok, err
}

// readTarget looks at a staging or publish dir: its vol_data.json and
// whether its target (dir/<mountDir>) is mounted. A vol_data.json that is
// there but unreadable is reported in the target, not as an error: the
// decisions judge it.
func readTarget(mounts MountChecker, dir, mountDir string) (target, error) {
	var t target
	if _, err := os.Lstat(dir); err == nil {
		t.DirExists = true
	} else if !errors.Is(err, fs.ErrNotExist) {
		return target{}, err
	}
	mounted, err := mounts.IsMountPoint(filepath.Join(dir, mountDir))
	if err != nil {
		return target{}, fmt.Errorf("checking whether %s is mounted: %w", filepath.Join(dir, mountDir), err)
	}
	t.Mounted = mounted
	if !t.DirExists {
		return t, nil
	}
	d, err := readVolData(filepath.Join(dir, volDataFileName))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		t.DataErr = err
	default:
		t.Data = &d
	}
	return t, nil
}

func readVolData(path string) (VolData, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return VolData{}, err
	}
	return decodeVolData(path, b)
}

// writeVolData records d in dir/vol_data.json, creating dir (0750, as the
// kubelet) and, for staging, the target itself (the CO creates the staging
// target; the driver creates the publish target).
func writeVolData(dir string, d VolData, mkTarget string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	if mkTarget != "" {
		if err := os.MkdirAll(filepath.Join(dir, mkTarget), 0o750); err != nil {
			return err
		}
	}
	b, err := d.encode()
	if err != nil {
		return err
	}
	// Unlike the kubelet's plain os.Create, written atomically: a crash
	// must not leave a half-written record that no restart can read.
	return atomicfile.Write(filepath.Join(dir, volDataFileName), b, 0o640)
}

// removeTarget removes dir/<mountDir> (only if it is no mount point and
// empty: os.Remove never removes a non-empty dir), dir/vol_data.json and
// dir, as the kubelet's removeMountDir. Missing pieces are no error.
func removeTarget(mounts MountChecker, dir, mountDir string) error {
	tgt := filepath.Join(dir, mountDir)
	mounted, err := mounts.IsMountPoint(tgt)
	if err != nil {
		return fmt.Errorf("checking whether %s is mounted: %w", tgt, err)
	}
	if mounted {
		return fmt.Errorf("%s is still mounted", tgt)
	}
	for _, p := range []string{tgt, filepath.Join(dir, volDataFileName), dir} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing %s: %w", p, err)
		}
	}
	return nil
}
