package conformance

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/hostclean"
	"github.com/berth-dev/berth/internal/runtime/containerd"
)

// TestReapDead checks that a run removes what runs that were killed left,
// and nothing else: of a dead node its processes, mounts and root dir
// (berth reset does the rest); of a dead control plane its addresses on lo,
// its reject rules and its directory. A live run's environment and a
// directory without a record stay.
func TestReapDead(t *testing.T) {
	bin := hostTest(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	self, err := containerd.ProcessIdentity(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// The same pid started at another time: a process that is gone.
	dead := self
	dead.StartTime++

	deadNode := envDir(t, "berth-conf-")
	state := stateArgs(deadNode, fmt.Sprintf("bconf%04x", rand.IntN(0xffff)), fmt.Sprintf("/berth-conf-%08x", rand.Uint32()), "")
	record(t, deadNode, envOwner{Owner: dead, ResetArgs: state})
	mnt := filepath.Join(deadNode, "pods", "p", "volumes", "v")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hostclean.UnmountUnder(deadNode) })
	stray := startNaming(t, deadNode)

	// The host's dirs as a run found them: the first two absent, the third
	// holding another user's file.
	host := t.TempDir()
	made, shared := filepath.Join(host, "kubelet"), filepath.Join(host, "cdi")
	registry := filepath.Join(made, "plugins_registry")
	if err := os.MkdirAll(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(shared, "other.json"))
	snapshot := map[string]map[string]bool{made: nil, registry: nil, shared: {"other.json": true}}
	// What the run and its DRA drivers put there.
	writeTestFile(t, filepath.Join(registry, draEntryPrefix+"1.k8s.io-reg.sock"))
	writeTestFile(t, filepath.Join(shared, draEntryPrefix+"1.k8s.io-claim.json"))

	deadCP := envDir(t, "berth-conf-cp-")
	ip := fmt.Sprintf("10.254.%d.%d", 250+rand.IntN(5), 1+rand.IntN(250))
	record(t, deadCP, envOwner{Owner: dead, IPs: []string{ip}, HostDirs: snapshot})
	net := &nodeNet{ips: []string{ip}}
	if err := net.add(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(net.remove)
	reject, err := addServiceReject(ctx, filepath.Base(deadCP))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reject.remove)

	liveNode := envDir(t, "berth-conf-")
	record(t, liveNode, envOwner{Owner: self, ResetArgs: stateArgs(liveNode, "bconflive", "/berth-conf-live", "")})
	unrecorded := envDir(t, "berth-conf-")

	if err := reapDead(ctx, bin, io.Discard); err != nil {
		t.Fatalf("reapDead: %v", err)
	}
	for _, gone := range []string{deadNode, deadCP} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", gone, err)
		}
	}
	for _, kept := range []string{liveNode, unrecorded} {
		if _, err := os.Stat(kept); err != nil {
			t.Errorf("%s was removed: %v", kept, err)
		}
	}
	if hostclean.Alive(stray.Process.Pid) {
		t.Errorf("the dead node's process %d still runs", stray.Process.Pid)
	}
	if out, _ := exec.CommandContext(ctx, "ip", "-o", "addr", "show", "dev", "lo").Output(); strings.Contains(string(out), " "+ip+"/32") {
		t.Errorf("the dead control plane's address %s is still on lo", ip)
	}
	if out, _ := exec.CommandContext(ctx, "iptables", "-S", "OUTPUT").Output(); strings.Contains(string(out), reject.comment) {
		t.Errorf("the dead control plane's reject rules are still there")
	}
	// A run lives (liveNode): what is in the host's dirs may be its.
	if _, err := os.Stat(filepath.Join(shared, draEntryPrefix+"1.k8s.io-claim.json")); err != nil {
		t.Errorf("a dead run's entry in the host's dirs was removed while another run lives: %v", err)
	}

	// With no run alive, the dead run's entries and the dirs it made go.
	if err := os.Remove(filepath.Join(liveNode, ownerName)); err != nil {
		t.Fatal(err)
	}
	deadCP2 := envDir(t, "berth-conf-cp-")
	record(t, deadCP2, envOwner{Owner: dead, HostDirs: snapshot})
	if err := reapDead(ctx, bin, io.Discard); err != nil {
		t.Fatalf("reapDead, no run alive: %v", err)
	}
	if entries, _ := os.ReadDir(shared); len(entries) != 1 || entries[0].Name() != "other.json" {
		t.Errorf("%s holds %v, want only other.json", shared, entries)
	}
	if _, err := os.Stat(made); !os.IsNotExist(err) {
		t.Errorf("%s, which the dead run made, is still there (%v)", made, err)
	}
}

func writeTestFile(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// envDir makes a directory as the harness names its environments'.
func envDir(t *testing.T, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func record(t *testing.T, dir string, o envOwner) {
	t.Helper()
	if err := putOwner(dir, o); err != nil {
		t.Fatal(err)
	}
}

// startNaming starts a process whose command line names dir, as a node's
// berth, containerd and shims do.
func startNaming(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(dir, "bin", "sleep")
	if err := os.MkdirAll(filepath.Dir(prog), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prog, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prog, "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait() // reaps it once reapDead kills it
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd
}
