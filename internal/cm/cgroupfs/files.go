package cgroupfs

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// writeFile writes value to an interface file the kernel created. It never
// creates the file: on cgroupfs a missing file means a missing cgroup or a
// controller that is not enabled, and that must surface as an error. The
// error keeps the bare errno (not the *PathError around it) so that the
// message reads "write <file> = <value>: <errno>" and errors.Is still works.
func writeFile(file, value string) error {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("write %s = %s: %w", file, value, bareErrno(err))
	}
	_, werr := f.Write([]byte(value))
	cerr := f.Close()
	if werr != nil {
		return fmt.Errorf("write %s = %s: %w", file, value, bareErrno(werr))
	}
	if cerr != nil {
		return fmt.Errorf("write %s = %s: %w", file, value, bareErrno(cerr))
	}
	return nil
}

func bareErrno(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func readString(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", file, bareErrno(err))
	}
	return strings.TrimSpace(string(b)), nil
}

func readInt64(file string) (int64, error) {
	s, err := readString(file)
	if err != nil {
		return 0, err
	}
	return parseInt64(file, s)
}

func readUint64(file string) (uint64, error) {
	s, err := readString(file)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", file, err)
	}
	return v, nil
}

// readMaxInt64 reads a file that holds a number or "max" (returned as -1).
func readMaxInt64(file string) (int64, error) {
	s, err := readString(file)
	if err != nil {
		return 0, err
	}
	return parseMax(file, s)
}

func parseMax(file, s string) (int64, error) {
	if s == "max" {
		return -1, nil
	}
	return parseInt64(file, s)
}

func parseInt64(file, s string) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", file, err)
	}
	return v, nil
}

// formatMax is the v2 (and v1 pids.max) spelling of a limit: -1 is "max".
func formatMax(v int64) string {
	if v == -1 {
		return "max"
	}
	return strconv.FormatInt(v, 10)
}

// v1UnlimitedMemory is what memory.limit_in_bytes reads when no limit is set:
// the page counter's maximum, LONG_MAX rounded down to a page.
func v1UnlimitedMemory() int64 {
	page := int64(os.Getpagesize())
	return math.MaxInt64 / page * page
}

// mkdir creates one cgroup directory; one that exists already is fine.
func mkdir(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create cgroup %s: %w", dir, bareErrno(err))
	}
	return nil
}

// subdirs lists the child directories of dir, sorted; a missing dir has none.
func subdirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list cgroup %s: %w", dir, bareErrno(err))
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// removeTree removes dir and its descendant cgroups, deepest first. It only
// ever rmdirs: a cgroup directory's interface files go with it, and a
// directory that holds anything else is not a cgroup and is left alone.
func removeTree(dir string) error {
	children, err := subdirs(dir)
	if err != nil {
		return err
	}
	for _, c := range children {
		if err := removeTree(filepath.Join(dir, c)); err != nil {
			return err
		}
	}
	if err := unix.Rmdir(dir); err != nil && err != unix.ENOENT {
		return fmt.Errorf("remove cgroup %s: %w", dir, err)
	}
	return nil
}

// collectProcs adds the pids in dir's cgroup.procs, and in its descendants',
// to pids. Cgroups that vanish while being walked are skipped.
func collectProcs(dir string, pids map[int]struct{}) error {
	s, err := readString(filepath.Join(dir, "cgroup.procs"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, f := range strings.Fields(s) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return fmt.Errorf("read %s/cgroup.procs: %w", dir, err)
		}
		pids[pid] = struct{}{}
	}
	children, err := subdirs(dir)
	if err != nil {
		return err
	}
	for _, c := range children {
		if err := collectProcs(filepath.Join(dir, c), pids); err != nil {
			return err
		}
	}
	return nil
}
