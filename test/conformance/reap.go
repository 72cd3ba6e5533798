package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/berth-dev/berth/internal/atomicfile"
	"github.com/berth-dev/berth/internal/hostclean"
	"github.com/berth-dev/berth/internal/runtime/containerd"
)

// ownerName is the record, in the control plane's directory and in each
// node's root, of the run that made it: what StartEnv needs to remove the
// environment of a run that was killed before its Stop (a SIGKILL of go
// test, a session torn down mid-run). Such a run leaves its nodes' pods,
// mounts, network namespaces, iptables rules, cgroups and bridges, and
// the control plane's addresses on lo.
const ownerName = "conformance-owner.json"

// envGlob matches the directories of every run's control plane
// (berth-conf-cp-*) and nodes (berth-conf-*).
const envGlob = "/tmp/berth-conf-*"

// envOwner is an environment's record.
type envOwner struct {
	// Owner is the process of the run (the test binary, or the
	// conformance command): the environment is dead once it is gone.
	Owner containerd.Identity `json:"owner"`
	// ResetArgs are a node's flags of `berth run`, which `berth reset`
	// takes to find and remove what that berth made.
	ResetArgs []string `json:"resetArgs,omitempty"`
	// IPs are the control plane's addresses on lo (nodeNet).
	IPs []string `json:"ips,omitempty"`
	// HostDirs are the control plane's run's snapshot of draHostDirs
	// (hostDirs.before): the nodes make the kubelet's plugins_registry,
	// and the DRA specs' drivers their sockets and CDI specs.
	HostDirs map[string]map[string]bool `json:"hostDirs,omitempty"`
}

// writeOwner records the running process as the owner of dir.
func writeOwner(dir string, o envOwner) error {
	self, err := containerd.ProcessIdentity(os.Getpid())
	if err != nil {
		return fmt.Errorf("owner of %s: %w", dir, err)
	}
	o.Owner = self
	return putOwner(dir, o)
}

// putOwner writes o as dir's record.
func putOwner(dir string, o envOwner) error {
	data, err := json.Marshal(o)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, ownerName), data, 0o644); err != nil {
		return fmt.Errorf("owner of %s: %w", dir, err)
	}
	return nil
}

// readOwner reads dir's record; ok is false when it has none (a run that
// is just creating it, or one from before the records) or one that
// cannot be read: such a directory is left alone.
func readOwner(dir string) (envOwner, bool) {
	data, err := os.ReadFile(filepath.Join(dir, ownerName))
	if err != nil {
		return envOwner{}, false
	}
	var o envOwner
	if json.Unmarshal(data, &o) != nil || o.Owner.PID <= 1 {
		return envOwner{}, false
	}
	return o, true
}

// ownerAlive reports whether o's run still runs: the same pid, start time
// and boot (a pid alone may have been reused since).
func ownerAlive(o envOwner) bool {
	live, err := containerd.ProcessIdentity(o.Owner.PID)
	return err == nil && o.Owner.Names(live)
}

// reapDead removes the environments of runs that are gone, each with what
// its record names, and returns what it could not remove. berthBin is the
// directory of the berth whose `reset` clears a node. Environments of live
// runs, and directories without a record, are not touched.
func reapDead(ctx context.Context, berthBin string, log io.Writer) error {
	dirs, err := filepath.Glob(envGlob)
	if err != nil {
		return err
	}
	dead := map[string]envOwner{}
	someLive := false
	for _, dir := range dirs {
		o, ok := readOwner(dir)
		switch {
		case !ok:
		case ownerAlive(o):
			someLive = true
		default:
			dead[dir] = o
		}
	}
	var errs []error
	for _, dir := range dirs {
		o, ok := dead[dir]
		if !ok {
			continue
		}
		fmt.Fprintf(log, "conformance: removing %s, left by a run that is gone (pid %d)\n", dir, o.Owner.PID)
		if strings.HasPrefix(filepath.Base(dir), "berth-conf-cp-") {
			// The host's dirs are shared: what a live run's drivers put
			// there since cannot be told from the dead run's.
			errs = append(errs, reapControlPlane(dir, o, !someLive))
		} else {
			errs = append(errs, reapNode(ctx, berthBin, dir, o))
		}
	}
	return errors.Join(errs...)
}

// reapNode stops what still runs of a node (berth, containerd, shims: all
// name the root dir), lets `berth reset` remove the rest of what berth
// made (pods' network namespaces and iptables rules, cgroups, bridge,
// mounts, state), then removes the root dir.
func reapNode(ctx context.Context, berthBin, root string, o envOwner) error {
	killNaming(root)
	if len(o.ResetArgs) > 0 {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		args := append([]string{"reset", "--force"}, o.ResetArgs...)
		out, err := exec.CommandContext(ctx, filepath.Join(berthBin, "berth"), args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("berth reset of %s: %w\n%s", root, err, out)
		}
	}
	if err := hostclean.UnmountUnder(root); err != nil {
		return fmt.Errorf("dead node %s: %w", root, err)
	}
	return removeDir(root)
}

// reapControlPlane stops what still runs of a control plane (etcd, the API
// server and the rest name its directory), removes its addresses from lo,
// its Service range's reject rules and, withHostDirs, what its run left
// in draHostDirs, then its directory. kube-proxy's rules are removed by the
// next kube-proxy to start (StartKubeProxy).
func reapControlPlane(dir string, o envOwner, withHostDirs bool) error {
	killNaming(dir)
	(&nodeNet{ips: o.IPs}).remove()
	newServiceReject(filepath.Base(dir)).remove()
	var err error
	if withHostDirs && o.HostDirs != nil {
		// Sorted, a dir comes before what is in it, as in draHostDirs.
		err = (&hostDirs{before: o.HostDirs}).remove(slices.Sorted(maps.Keys(o.HostDirs)))
	}
	return errors.Join(err, removeDir(dir))
}

func removeDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}
