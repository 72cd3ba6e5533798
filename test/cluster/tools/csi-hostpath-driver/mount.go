package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// mount is one line of /proc/self/mountinfo, what the driver needs of it.
type mount struct {
	point    string
	readOnly bool // the mount's own options, not the file system's
}

// mounts lists the mounts of the driver's mount namespace (the host's: it
// runs as a host process), in the order they were made.
func mounts() ([]mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// ID parent major:minor root mount-point options ...
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			return nil, fmt.Errorf("/proc/self/mountinfo: short line %q", sc.Text())
		}
		out = append(out, mount{
			point:    unescapeMountPath(fields[4]),
			readOnly: slices.Contains(strings.Split(fields[5], ","), "ro"),
		})
	}
	return out, sc.Err()
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space,
// and so on).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountAt returns the topmost mount at path, or nil if path is no mount
// point.
func mountAt(path string) (*mount, error) {
	path = filepath.Clean(path)
	// The kernel names mount points by their real path.
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	ms, err := mounts()
	if err != nil {
		return nil, err
	}
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].point == path {
			return &ms[i], nil
		}
	}
	return nil, nil
}

// bindMount mounts src at dst, read-only if ro: a bind mount takes its
// read-only flag from a remount only.
func bindMount(src, dst string, ro bool) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mount %s at %s: %w", src, dst, err)
	}
	if !ro {
		return nil
	}
	if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		uerr := unix.Unmount(dst, 0)
		return errors.Join(fmt.Errorf("remount %s read-only: %w", dst, err), uerr)
	}
	return nil
}

// unmountAll unmounts everything mounted at path (a retried publish may
// have stacked mounts there); nothing mounted is no error.
func unmountAll(path string) error {
	for range 16 {
		m, err := mountAt(path)
		if err != nil || m == nil {
			return err
		}
		if err := unix.Unmount(path, 0); err != nil {
			return fmt.Errorf("unmount %s: %w", path, err)
		}
	}
	return fmt.Errorf("unmount %s: still mounted after 16 unmounts", path)
}

// sameFile says whether a and b are one directory: a bind mount shows its
// source's inode.
func sameFile(a, b string) (bool, error) {
	var sa, sb unix.Stat_t
	if err := unix.Stat(a, &sa); err != nil {
		return false, fmt.Errorf("stat %s: %w", a, err)
	}
	if err := unix.Stat(b, &sb); err != nil {
		return false, fmt.Errorf("stat %s: %w", b, err)
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino, nil
}
