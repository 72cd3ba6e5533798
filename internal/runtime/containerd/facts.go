package containerd

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// capSysResource is CAP_SYS_RESOURCE's bit in the capability sets.
const capSysResource = 24

// detectFacts measures the host facts the config depends on. dir is where
// containerd's root will live, so the overlay probe runs on that filesystem.
func detectFacts(dir string) (hostFacts, error) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return hostFacts{}, fmt.Errorf("read capabilities: %w", err)
	}
	hasCap, err := hasEffectiveCap(status, capSysResource)
	if err != nil {
		return hostFacts{}, fmt.Errorf("/proc/self/status: %w", err)
	}
	facts := hostFacts{Snapshotter: SnapshotterOverlay, RestrictOOMScoreAdj: !hasCap}
	if err := probeOverlay(dir); err != nil {
		facts.Snapshotter = SnapshotterNative
		return facts, &overlayUnsupportedError{err: err}
	}
	return facts, nil
}

// overlayUnsupportedError tells why the native snapshotter was chosen. It
// is not fatal: the facts that come with it are usable.
type overlayUnsupportedError struct{ err error }

func (e *overlayUnsupportedError) Error() string {
	return "overlay mounts do not work here, using the native snapshotter: " + e.err.Error()
}
func (e *overlayUnsupportedError) Unwrap() error { return e.err }

// hasEffectiveCap reports whether the CapEff line of a /proc/<pid>/status
// file has bit capability set.
func hasEffectiveCap(status []byte, capability uint) (bool, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "CapEff:")
		if !ok {
			continue
		}
		mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			return false, fmt.Errorf("CapEff %q: %w", strings.TrimSpace(v), err)
		}
		return mask&(1<<capability) != 0, nil
	}
	return false, fmt.Errorf("no CapEff line")
}

// probeOverlay mounts a throw-away overlay in a temp dir under dir, the way
// the overlayfs snapshotter will, and undoes it. It fails where overlay is
// missing or where dir's filesystem cannot be an upper dir (e.g. overlay on
// overlay).
func probeOverlay(dir string) (err error) {
	tmp, err := os.MkdirTemp(dir, "overlay-probe-")
	if err != nil {
		return err
	}
	defer func() {
		if rmErr := os.RemoveAll(tmp); rmErr != nil && err == nil {
			err = rmErr
		}
	}()
	sub := map[string]string{}
	for _, name := range []string{"lower", "upper", "work", "merged"} {
		sub[name] = filepath.Join(tmp, name)
		if err := os.Mkdir(sub[name], 0o700); err != nil {
			return err
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", sub["lower"], sub["upper"], sub["work"])
	if err := syscall.Mount("overlay", sub["merged"], "overlay", 0, opts); err != nil {
		return fmt.Errorf("mount overlay on %s: %w", sub["merged"], err)
	}
	if err := syscall.Unmount(sub["merged"], 0); err != nil {
		// Detach it, so that the RemoveAll above cannot reach through it
		// into the lower and upper dirs' mount.
		_ = syscall.Unmount(sub["merged"], syscall.MNT_DETACH)
		return fmt.Errorf("unmount %s: %w", sub["merged"], err)
	}
	return nil
}

// versionTimeout bounds `containerd config default`.
const versionTimeout = 10 * time.Second

// binaryFacts are what the config depends on about the containerd binary
// itself: the config version it reads and the runc beside it.
type binaryFacts struct {
	ConfigVersion int
	// Runc is the runc in the binary's directory, "" when there is none
	// (the shim then runs the runc of PATH).
	Runc string
}

// detectBinary asks binary for its default config, whose version is the
// one it reads without migrating, and looks for a runc beside it.
func detectBinary(ctx context.Context, binary string) (binaryFacts, error) {
	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "config", "default").Output()
	if err != nil {
		return binaryFacts{}, fmt.Errorf("%s config default: %w", binary, err)
	}
	v, err := parseConfigVersion(string(out))
	if err != nil {
		return binaryFacts{}, fmt.Errorf("%s config default: %w", binary, err)
	}
	f := binaryFacts{ConfigVersion: v}
	runc := filepath.Join(filepath.Dir(binary), "runc")
	if fi, err := os.Stat(runc); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
		f.Runc = runc
	}
	return f, nil
}

// parseConfigVersion reads the top-level "version = N" of a containerd
// config: the first such line before any table.
func parseConfigVersion(config string) (int, error) {
	for _, l := range strings.Split(config, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "[") {
			break
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok || strings.TrimSpace(k) != "version" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return 0, fmt.Errorf("config version %q is not a positive number", strings.TrimSpace(v))
		}
		return n, nil
	}
	return 0, fmt.Errorf("no top-level version line in the default config")
}
