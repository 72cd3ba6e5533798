package reset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/cnigc"
	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/hostclean"
	"github.com/berth-dev/berth/internal/network"
	"github.com/berth-dev/berth/internal/runtime"
	"github.com/berth-dev/berth/internal/runtime/containerd"
)

const (
	// stopTimeout bounds stopping the pods through the CRI: each pod's
	// grace is the runtime's (StopPodSandbox kills at once), so this is
	// time for many pods on a loaded machine.
	stopTimeout = 5 * time.Minute
	// containerdStopTimeout is the SIGTERM grace of the containerd.
	containerdStopTimeout = 30 * time.Second
	// goneWait bounds the wait for killed processes to leave their cgroups.
	goneWait  = 10 * time.Second
	pollEvery = 100 * time.Millisecond
)

// ErrAborted is Run's error when the operator did not confirm.
var ErrAborted = errors.New("reset aborted: not confirmed")

// Confirm is asked, with the plan, before anything is changed.
type Confirm func(steps []Step) (bool, error)

// Run resets berth's traces for o: it inspects, plans, asks confirm,
// applies, and inspects again to check that nothing is left. It tells the
// operator what it does on out.
func Run(ctx context.Context, o Options, confirm Confirm, out io.Writer, log *slog.Logger) error {
	f, err := Inspect(ctx, o)
	if err != nil {
		return fmt.Errorf("reset: inspect %s: %w", o.RootDir, err)
	}
	steps, err := Plan(o, f)
	if err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	if len(steps) == 0 {
		fmt.Fprintf(out, "[reset] nothing to do: no trace of berth for root dir %s\n", o.RootDir)
		return nil
	}
	fmt.Fprintf(out, "[reset] for root dir %s, berth will:\n", o.RootDir)
	for _, s := range steps {
		fmt.Fprintf(out, "  - %s\n", s.What)
	}
	if ok, err := confirm(steps); err != nil {
		return fmt.Errorf("reset: %w", err)
	} else if !ok {
		return ErrAborted
	}
	a := applier{o: o, f: f, out: out, log: log}
	// A step that failed was a warning; what counts is what is left: the
	// pods that could not be stopped through the CRI are killed by a later
	// step, for one.
	stepErr := a.apply(ctx, steps)
	left, err := Inspect(ctx, o)
	if err != nil {
		return errors.Join(stepErr, err)
	}
	if rest, _ := Plan(o, left); len(rest) > 0 {
		var what []string
		for _, s := range rest {
			what = append(what, s.What)
		}
		err = errors.Join(stepErr, fmt.Errorf("reset left work undone; run it again to retry: %s", strings.Join(what, "; ")))
	}
	if len(left.Foreign) > 0 {
		fmt.Fprintf(out, "[reset] left in place, not berth's: %s\n", strings.Join(left.Foreign, ", "))
	}
	if err == nil {
		fmt.Fprintf(out, "[reset] done: nothing of berth is left for root dir %s\n", o.RootDir)
	}
	return err
}

type applier struct {
	o   Options
	f   Facts
	out io.Writer
	log *slog.Logger
	// managed is the containerd started or adopted to stop the pods.
	managed *containerd.Managed
}

func (a *applier) apply(ctx context.Context, steps []Step) error {
	var errs []error
	for _, s := range steps {
		fmt.Fprintf(a.out, "[reset] %s\n", s.What)
		if err := a.do(ctx, s.Kind); err != nil {
			// As kubeadm reset does, go on: what is left is reported.
			fmt.Fprintf(a.out, "[reset] warning: %v\n", err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (a *applier) do(ctx context.Context, k StepKind) error {
	switch k {
	case StopPods:
		return a.stopPods(ctx)
	case StopContainerd:
		return a.stopContainerd(ctx)
	case KillProcesses:
		return killProcesses(a.o)
	case RemoveNetNS:
		return removeNetNS(a.f.NetNS)
	case RemoveRules:
		return removeRules(ctx, a.o.Network, a.f.SandboxIDs)
	case RemoveMasquerade:
		return removeMasquerade(ctx, a.f.Masquerade)
	case RemoveCNICache:
		return resultCache(a.o).Remove(a.f.CNICache)
	case DeleteBridge:
		return errors.Join(deleteBridge(ctx, a.o.Bridge), deleteBridge(ctx, a.f.RangeBridge))
	case Unmount:
		return hostclean.UnmountUnder(filepath.Clean(a.o.RootDir))
	case RemoveCgroups:
		return removeCgroups(a.o)
	case RemovePodLogs:
		return removeAll(a.f.PodLogDirs, a.o.RootDir, a.o.PodLogsDir)
	case RemoveState:
		return removeState(a.o, a.f)
	}
	return fmt.Errorf("unknown step %d", k)
}

// stopPods stops and removes every sandbox (of berth, in a runtime it
// does not manage) through the CRI, as the kubelet's shutdown of a pod
// does; StopPodSandbox tears down the network, the netns and the
// iptables rules with it.
func (a *applier) stopPods(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, stopTimeout)
	defer cancel()
	endpoint := a.o.RuntimeEndpoint
	var filter *runtimeapi.PodSandboxFilter
	if endpoint == "" {
		m, err := containerd.Start(ctx, containerd.Options{RootDir: a.o.RootDir, Log: a.log})
		if err != nil {
			return fmt.Errorf("start the managed containerd to stop the pods (they are killed instead): %w", err)
		}
		a.managed = m
		endpoint = m.Endpoint()
	} else {
		filter = &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{container.LabelManagedBy: "true"}}
	}
	cri, err := runtime.Dial(ctx, endpoint)
	if err != nil {
		return err
	}
	defer cri.Close()
	sandboxes, err := cri.ListPodSandboxes(ctx, filter)
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	var errs []error
	for _, sb := range sandboxes {
		name := sb.GetMetadata().GetNamespace() + "/" + sb.GetMetadata().GetName()
		if err := cri.StopPodSandbox(ctx, sb.Id); err != nil {
			errs = append(errs, fmt.Errorf("stop pod %s (sandbox %s): %w", name, sb.Id, err))
			continue
		}
		if err := cri.RemovePodSandbox(ctx, sb.Id); err != nil {
			errs = append(errs, fmt.Errorf("remove pod %s (sandbox %s): %w", name, sb.Id, err))
			continue
		}
		fmt.Fprintf(a.out, "[reset]   removed pod %s\n", name)
	}
	return errors.Join(errs...)
}

// stopContainerd stops the managed containerd, launched or adopted; if it
// could not be reached, the process recorded as running its config.
func (a *applier) stopContainerd(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, containerdStopTimeout)
	defer cancel()
	if a.managed != nil {
		return a.managed.Stop(ctx)
	}
	dir := filepath.Join(a.o.RootDir, "containerd")
	if pid := containerdPID(dir); pid > 0 {
		hostclean.Stop(pid, containerdStopTimeout)
		if alive(pid) {
			return fmt.Errorf("containerd (pid %d) still runs after SIGKILL", pid)
		}
	}
	return nil
}

// killProcesses kills what is still running of berth's pods and shims,
// found afresh (pids are not kept between inspection and now, so a pid
// reused since is never hit), until none is left.
func killProcesses(o Options) error {
	deadline := time.Now().Add(goneWait)
	for {
		pids := processes(o)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v still run %v after SIGKILL", pids, goneWait)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(pollEvery)
	}
}

// removeNetNS unmounts and removes the named network namespaces berth's
// pods were in, as containerd does when it removes a sandbox.
func removeNetNS(paths []string) error {
	var errs []error
	for _, p := range paths {
		errs = append(errs, cnigc.RemoveNetNS(p))
	}
	return errors.Join(errs...)
}

// removeRules deletes the iptables rules of berth's sandboxes that are
// still there (stopping the pods through the CRI removes them already),
// then flushes and deletes their own chains: one iptables-restore
// transaction per sandbox, so that one that fails keeps no other's.
func removeRules(ctx context.Context, network string, ids []string) error {
	var errs []error
	for _, h := range berthRules(ctx, network, ids) {
		rctx, cancel := context.WithTimeout(ctx, iptablesTimeout)
		err := cnigc.IPTables{}.Restore(rctx, cnigc.Script(h))
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("sandbox %s: %w", h.ID, err))
		}
	}
	return errors.Join(errs...)
}

// removeMasquerade deletes berth's masquerade chain of each pod CIDR and
// the POSTROUTING jumps to it, one iptables-restore transaction per CIDR.
func removeMasquerade(ctx context.Context, jumps map[string][]string) error {
	var errs []error
	for cidr, lines := range jumps {
		rctx, cancel := context.WithTimeout(ctx, iptablesTimeout)
		err := cnigc.IPTables{}.Restore(rctx, network.UnmasqueradeScript(cidr, lines))
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("masquerade chain of %s: %w", cidr, err))
		}
	}
	return errors.Join(errs...)
}

func deleteBridge(ctx context.Context, name string) error {
	if !isBridge(name) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, iptablesTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "ip", "link", "del", name).CombinedOutput(); err != nil {
		return fmt.Errorf("delete bridge %s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// removeCgroups removes the kubepods tree, once the processes killed have
// left it, and the cgroup root's dir where it is empty (an operator's
// cgroup with others' children stays).
func removeCgroups(o Options) error {
	rel := filepath.Join(filepath.Clean("/"+o.CgroupRoot), kubepods)
	deadline := time.Now().Add(goneWait)
	var err error
	for {
		hostclean.KillCgroupProcs(rel)
		if err = hostclean.RemoveCgroups(rel); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(pollEvery)
	}
	_, roots := cgroupDirsSplit(o.CgroupRoot)
	for _, d := range roots {
		if rmErr := syscall.Rmdir(d); rmErr != nil && !errors.Is(rmErr, syscall.ENOENT) &&
			!errors.Is(rmErr, syscall.EBUSY) && !errors.Is(rmErr, syscall.ENOTEMPTY) {
			err = errors.Join(err, fmt.Errorf("remove cgroup %s: %w", d, rmErr))
		}
	}
	return err
}

// removeAll removes paths, then dir itself if it is empty and inside
// root (berth made it there).
func removeAll(paths []string, root, dir string) error {
	var errs []error
	for _, p := range paths {
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
		}
	}
	if _, inside := childOf(root, dir); inside {
		if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeState removes berth's entries in the root dir and its files in
// the kubelet's dirs; the root dir goes too when nothing else is in it.
func removeState(o Options, f Facts) error {
	var errs []error
	for _, p := range f.State {
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
		}
	}
	for _, d := range []string{o.DevicePluginDir, o.PodResourcesDir} {
		var mine []string
		for _, p := range f.BerthFiles {
			if filepath.Dir(p) == filepath.Clean(d) {
				mine = append(mine, p)
			}
		}
		errs = append(errs, removeAll(mine, o.RootDir, d))
	}
	if err := os.Remove(o.RootDir); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
