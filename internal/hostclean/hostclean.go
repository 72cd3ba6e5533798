// Package hostclean removes what a berth left on the host when it is gone:
// processes, mounts and cgroups. The end-to-end tests and the performance
// harness both run berths on their own root dir and cgroup root and must
// leave the machine as they found it; nothing here touches anything outside
// the dir or cgroup root it is given.
package hostclean

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CgroupMounts are the mount points of the cgroup hierarchies (each v1
// controller's and the v2 one), from this process's mount table, each
// once.
func CgroupMounts() []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for line := range strings.SplitSeq(string(data), "\n") {
		_, after, ok := strings.Cut(line, " - ")
		fields, post := strings.Fields(line), strings.Fields(after)
		if !ok || len(fields) < 5 || len(post) < 1 || (post[0] != "cgroup" && post[0] != "cgroup2") {
			continue
		}
		if !slices.Contains(out, fields[4]) {
			out = append(out, fields[4])
		}
	}
	return out
}

// Alive reports whether pid runs; a zombie counts as gone (a containerd
// that outlived the berth that started it has nobody to reap it).
func Alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(data), ") ")
	return !strings.HasPrefix(rest, "Z")
}

// Stop sends pid SIGTERM and, if it still runs after grace, SIGKILL.
// It never signals pid 1 or below: those are init, a process group or
// every process.
func Stop(pid int, grace time.Duration) {
	if pid <= 1 {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for deadline := time.Now().Add(grace); Alive(pid) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if Alive(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// MountsUnder lists the mount points below dir, in the mount table's
// order (a parent before what is mounted on it).
func MountsUnder(dir string) ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for line := range strings.SplitSeq(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			out = append(out, fields[4])
		}
	}
	return out, nil
}

// UnmountUnder unmounts every mount below dir, deepest first.
func UnmountUnder(dir string) error {
	targets, err := MountsUnder(dir)
	if err != nil {
		return err
	}
	var errs []error
	for i := len(targets) - 1; i >= 0; i-- {
		// EINVAL: no longer a mount point (a parent's detach took it).
		if err := syscall.Unmount(targets[i], syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", targets[i], err))
		}
	}
	return errors.Join(errs...)
}

// KillCgroupProcs kills every process in the cgroup tree at root, in any
// hierarchy (a process the runtime lost, such as the runc init of an exec
// that timed out, keeps its cgroup), and reports whether it killed any.
func KillCgroupProcs(root string) bool {
	killed := false
	for _, m := range CgroupMounts() {
		_ = filepath.WalkDir(filepath.Join(m, root), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			for _, field := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(field); err == nil && pid > 1 && pid != os.Getpid() {
					_ = syscall.Kill(pid, syscall.SIGKILL)
					killed = true
				}
			}
			return nil
		})
	}
	return killed
}

// RemoveCgroups removes the cgroup tree at root in every hierarchy,
// deepest first.
func RemoveCgroups(root string) error {
	var errs []error
	for _, m := range CgroupMounts() {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(m, root), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dirs[i], err))
			}
		}
	}
	return errors.Join(errs...)
}
