package cgroupfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Kill sends SIGKILL to every process in the cgroup and its descendants and
// returns the pids it found there (sorted). It does not wait for them to
// die: the caller polls Pids, and Destroy, on its own clock.
//
// The kubelet's pod cgroup manager kills each pid of the pod cgroup
// (tryKillingCgroupProcesses) before removing it. berth does the same, but
// first stops the cgroup from growing while it is being emptied: on cgroup
// v2 with cgroup.kill (Linux 5.14 and later) the kernel kills the whole
// subtree at once, fork races included; otherwise the cgroup is frozen (v2
// cgroup.freeze, the v1 freezer) around the kill loop so that no process can
// fork a child the loop has not seen, and thawed again, since a v1 frozen
// task only acts on its SIGKILL once thawed.
func (m *Manager) Kill(p string) ([]int, error) {
	if err := checkNotRoot(p); err != nil {
		return nil, err
	}
	pids, err := m.Pids(p)
	if err != nil || len(pids) == 0 {
		return nil, wrapKill(p, err)
	}
	if m.version == 2 {
		err := writeFile(filepath.Join(m.root, p, "cgroup.kill"), "1")
		if err == nil {
			return pids, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return pids, wrapKill(p, err)
		}
		// An older kernel: freeze and kill one by one.
	}
	thaw, ferr := m.freeze(p)
	// Read again under the freeze: what forked since the first read is in.
	if again, err := m.Pids(p); err == nil {
		pids = again
	}
	errs := []error{ferr}
	for _, pid := range pids {
		if err := unix.Kill(pid, unix.SIGKILL); err != nil && err != unix.ESRCH {
			errs = append(errs, fmt.Errorf("kill %d: %w", pid, err))
		}
	}
	errs = append(errs, thaw())
	return pids, wrapKill(p, errors.Join(errs...))
}

func wrapKill(p string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("kill the processes of cgroup %s: %w", p, err)
}

// freeze freezes the cgroup where the host can, and returns how to thaw it.
// A host without a freezer (or a cgroup missing from the freezer hierarchy)
// is not an error: the kill loop still runs, only without the guard against
// forks, and the caller's next round catches what forked meanwhile.
func (m *Manager) freeze(p string) (thaw func() error, _ error) {
	file, frozen, thawed := filepath.Join(m.root, p, "cgroup.freeze"), "1", "0"
	if m.version == 1 {
		h := m.controllers["freezer"]
		if h == "" {
			return noThaw, nil
		}
		file, frozen, thawed = filepath.Join(h, p, "freezer.state"), "FROZEN", "THAWED"
	}
	if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
		return noThaw, nil
	}
	if err := writeFile(file, frozen); err != nil {
		// Thaw anyway: a failed write may have left it freezing.
		return func() error { return writeFile(file, thawed) }, err
	}
	return func() error { return writeFile(file, thawed) }, nil
}

func noThaw() error { return nil }
