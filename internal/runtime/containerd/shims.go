package containerd

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
)

// reapTimeout bounds listing containerd's containers to find orphaned shims.
const reapTimeout = 30 * time.Second

// shimProcess is a runtime v2 shim serving a containerd: its pid, the task
// (or, for a pod's shared shim, the sandbox) it was started for, and its
// containerd namespace.
type shimProcess struct {
	pid           int
	id, namespace string
}

// parseShim reads a process's argv as a shim of the containerd listening on
// address: containerd-shim-<runtime> -namespace NS -id ID -address ADDR.
func parseShim(pid int, argv []string, address string) (shimProcess, bool) {
	if len(argv) == 0 || !strings.HasPrefix(filepath.Base(argv[0]), "containerd-shim") {
		return shimProcess{}, false
	}
	flags := map[string]string{}
	for i := 1; i+1 < len(argv); i++ {
		if name, ok := strings.CutPrefix(argv[i], "-"); ok {
			flags[strings.TrimPrefix(name, "-")] = argv[i+1]
		}
	}
	if flags["address"] != address || flags["id"] == "" || flags["namespace"] == "" {
		return shimProcess{}, false
	}
	return shimProcess{pid: pid, id: flags["id"], namespace: flags["namespace"]}, true
}

// orphanShims returns the shims whose id names no container containerd
// knows in their namespace. containerd 1.6 forgets such a shim when it
// restarts: finding a task directory whose container is gone from its
// metadata (containerd was killed amid a container's creation or removal),
// it deletes the directory and leaves the process running, for ever.
// containerd records a container before it starts its shim and deletes the
// record only once the task and its shim are gone, so a live shim without
// a container is never one in use.
func orphanShims(shims []shimProcess, known map[string]sets.Set[string]) []shimProcess {
	var out []shimProcess
	for _, s := range shims {
		if !known[s.namespace].Has(s.id) {
			out = append(out, s)
		}
	}
	return out
}

// findOrphanShims lists the shims of the containerd at address that it no
// longer knows.
func findOrphanShims(ctx context.Context, address string) ([]shimProcess, error) {
	shims := shimsOf(address)
	if len(shims) == 0 {
		return nil, nil
	}
	c, err := newClient(address)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, reapTimeout)
	defer cancel()
	known := map[string]sets.Set[string]{}
	for _, s := range shims {
		if known[s.namespace] != nil {
			continue
		}
		cs, err := c.Containers(namespaces.WithNamespace(ctx, s.namespace))
		if err != nil {
			return nil, fmt.Errorf("listing containerd's containers in namespace %s: %w", s.namespace, err)
		}
		ids := sets.New[string]()
		for _, ctr := range cs {
			ids.Insert(ctr.ID())
		}
		known[s.namespace] = ids
	}
	return orphanShims(shims, known), nil
}

// killShims kills each shim after its children.
func killShims(shims []shimProcess) {
	for _, s := range shims {
		for _, child := range childrenOf(s.pid) {
			_ = syscall.Kill(child, syscall.SIGKILL)
		}
		_ = syscall.Kill(s.pid, syscall.SIGKILL)
	}
}

// ShimReapPeriod is how often ReapShims looks for forgotten shims.
const ShimReapPeriod = time.Minute

// ReapShims kills, until ctx ends, the shims of the containerd at address
// that it forgot while it ran: a shim whose sandbox was removed through
// the CRI although its task was never recorded (containerd killed between
// starting the shim and recording the task, then restarted). The start and
// the stop of the managed containerd catch the others at once; here, with
// sandboxes being created, a shim is killed only when it was already
// forgotten a whole period earlier, which no shim in use ever is, and one
// that a removal is shutting down is gone within milliseconds.
func ReapShims(ctx context.Context, address string, clk clock.WithTicker, log *slog.Logger) {
	t := clk.NewTicker(ShimReapPeriod)
	defer t.Stop()
	var suspects []shimProcess
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		orphans, err := findOrphanShims(ctx, address)
		if err != nil {
			log.Warn("looking for shims containerd forgot", "err", err)
			continue
		}
		confirmed := stillOrphans(suspects, orphans)
		killShims(confirmed)
		for _, s := range confirmed {
			log.Warn("killed a shim containerd no longer knows, and what it ran", "pid", s.pid, "id", s.id, "namespace", s.namespace)
		}
		suspects = orphans
	}
}

// stillOrphans returns the shims of now that were orphans in the previous
// pass too: the same process (pid) for the same task.
func stillOrphans(before, now []shimProcess) []shimProcess {
	var out []shimProcess
	for _, s := range now {
		if slices.Contains(before, s) {
			out = append(out, s)
		}
	}
	return out
}

// shimsOf lists the shim processes serving the containerd at address.
func shimsOf(address string) []shimProcess {
	var out []shimProcess
	for _, pid := range pids() {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue // gone meanwhile
		}
		argv := strings.Split(string(bytes.TrimRight(raw, "\x00")), "\x00")
		if s, ok := parseShim(pid, argv, address); ok {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b shimProcess) int { return a.pid - b.pid })
	return out
}

// childrenOf returns the processes whose parent is pid: a shim is the
// subreaper of its containers' processes.
func childrenOf(pid int) []int {
	var out []int
	for _, p := range pids() {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

// pids lists the processes in /proc.
func pids() []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}
