package volume

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// setupHostPath checks a hostPath volume against its type exactly as the
// kubelet's hostPath plugin does (pkg/volume/hostpath checkType), creating
// the path only for the *OrCreate types, and returns the path.
func setupHostPath(src *v1.HostPathVolumeSource) (string, error) {
	p := src.Path
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("hostPath %q must be an absolute path", p)
	}
	for _, elem := range strings.Split(p, "/") {
		if elem == ".." {
			return "", fmt.Errorf("hostPath %q must not contain '..'", p)
		}
	}
	t := v1.HostPathUnset
	if src.Type != nil {
		t = *src.Type
	}
	if err := checkHostPathType(p, t); err != nil {
		return "", err
	}
	return p, nil
}

func checkHostPathType(p string, t v1.HostPathType) error {
	// The kubelet stats through symlinks: a symlink to a directory is a
	// directory.
	fi, statErr := os.Stat(p)
	exists := statErr == nil
	fail := func(what string) error {
		return fmt.Errorf("hostPath type check failed: %s is not %s", p, what)
	}
	switch t {
	case v1.HostPathUnset:
		return nil
	case v1.HostPathDirectoryOrCreate:
		if !exists {
			if !errors.Is(statErr, fs.ErrNotExist) {
				return fmt.Errorf("hostPath type check failed: %w", statErr)
			}
			if err := os.MkdirAll(p, 0o755); err != nil {
				return fmt.Errorf("hostPath type check failed: creating directory: %w", err)
			}
			return nil
		}
		if !fi.IsDir() {
			return fail("a directory")
		}
	case v1.HostPathDirectory:
		if !exists || !fi.IsDir() {
			return fail("a directory")
		}
	case v1.HostPathFileOrCreate:
		if !exists {
			if !errors.Is(statErr, fs.ErrNotExist) {
				return fmt.Errorf("hostPath type check failed: %w", statErr)
			}
			// Like the kubelet, the parent directory must already exist.
			f, err := os.OpenFile(p, os.O_CREATE|os.O_RDONLY, 0o644)
			if err != nil {
				return fmt.Errorf("hostPath type check failed: creating file: %w", err)
			}
			return f.Close()
		}
		if fi.IsDir() {
			return fail("a file")
		}
	case v1.HostPathFile:
		// The kubelet takes anything that exists and is not a directory
		// (sockets and devices included) for a file.
		if !exists || fi.IsDir() {
			return fail("a file")
		}
	case v1.HostPathSocket:
		if !exists || fi.Mode().Type() != fs.ModeSocket {
			return fail("a socket file")
		}
	case v1.HostPathCharDev:
		if !exists || fi.Mode().Type() != fs.ModeDevice|fs.ModeCharDevice {
			return fail("a character device")
		}
	case v1.HostPathBlockDev:
		if !exists || fi.Mode().Type() != fs.ModeDevice {
			return fail("a block device")
		}
	default:
		return fmt.Errorf("hostPath type %q is not a valid type", t)
	}
	return nil
}
