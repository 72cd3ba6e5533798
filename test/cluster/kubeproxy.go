package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// KubeProxyOptions say what kube-proxy serves.
type KubeProxyOptions struct {
	// ClusterCIDR holds every pod address of the machine's berth nodes:
	// traffic to a Service from outside it is masqueraded.
	ClusterCIDR string
	// NodeName is the Node kube-proxy acts for. One kube-proxy serves every
	// berth node of the machine: they share the host's netfilter, and the
	// rules of ClusterIP Services are the same for all of them.
	NodeName string
}

// KubeProxy is kube-proxy in iptables mode, run as one host process: it
// programs the host's netfilter, which every berth node of this machine
// shares.
type KubeProxy struct {
	proc   *process
	bin    string
	dir    string
	unlock func()
	owned  bool // ownerChain was created by this one
}

// kubeProxyLock is held by the one kube-proxy of this network namespace's
// tests for as long as it runs: two would fight over the same chains. It is
// an abstract unix socket, so its scope is the scope of the chains (the
// network namespace, which test runs in other mount namespaces can share)
// and the kernel frees it when its holder dies, however it dies.
const kubeProxyLock = "@berth-test-kube-proxy"

// ownerChain marks the host's kube-proxy chains as made by a kube-proxy of
// these tests: created before it starts, removed after its rules are. Found
// by the next holder of kubeProxyLock, it means a test was killed while its
// kube-proxy ran, and that test's rules may be removed.
const ownerChain = "BERTH-TEST-KUBE-PROXY"

// StartKubeProxy starts kube-proxy against c, its files under
// c.Dir()/kube-proxy, and returns once it has programmed the host
// (healthz answers 200). It waits while another test's kube-proxy runs. It
// removes the rules of one a killed test left, and refuses to start when the
// host has kube-proxy chains of anyone else's (the host's own kube-proxy),
// since Stop removes every one of them. ctx bounds the start only.
func (c *ControlPlane) StartKubeProxy(ctx context.Context, bin string, opts KubeProxyOptions) (*KubeProxy, error) {
	if opts.ClusterCIDR == "" || opts.NodeName == "" {
		return nil, errors.New("kube-proxy: ClusterCIDR and NodeName are required")
	}
	dir := filepath.Join(c.dir, "kube-proxy")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	unlock, err := lockNetns(ctx, kubeProxyLock)
	if err != nil {
		return nil, fmt.Errorf("kube-proxy: %w", err)
	}
	kp := &KubeProxy{bin: bin, dir: dir, unlock: unlock}
	if err := kp.start(ctx, c, opts); err != nil {
		kp.Stop()
		return nil, err
	}
	return kp, nil
}

// lockNetns takes the network-namespace-wide lock name (an abstract unix
// socket), waiting while someone else holds it.
func lockNetns(ctx context.Context, name string) (unlock func(), err error) {
	for {
		l, err := net.Listen("unix", name)
		if err == nil {
			return func() { l.Close() }, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("lock %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for %s, held by another test: %w", name, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// removeLeftRules removes what a killed test's kube-proxy left, if its
// owner chain says there is any. Called under kubeProxyLock.
func (kp *KubeProxy) removeLeftRules(ctx context.Context) error {
	if exec.CommandContext(ctx, "iptables", "-t", "filter", "-S", ownerChain).Run() != nil {
		return nil // no owner chain: nothing of these tests' is left
	}
	if out, err := exec.CommandContext(ctx, kp.bin, "--cleanup").CombinedOutput(); err != nil {
		return fmt.Errorf("kube-proxy --cleanup of a killed test's rules: %w\n%s", err, out)
	}
	if err := removeKubeChains(ctx); err != nil {
		return err
	}
	return removeOwnerChain(ctx)
}

func removeOwnerChain(ctx context.Context) error {
	if exec.CommandContext(ctx, "iptables", "-t", "filter", "-S", ownerChain).Run() != nil {
		return nil
	}
	if out, err := exec.CommandContext(ctx, "iptables", "-t", "filter", "-X", ownerChain).CombinedOutput(); err != nil {
		return fmt.Errorf("iptables -X %s: %w: %s", ownerChain, err, out)
	}
	return nil
}

func (kp *KubeProxy) start(ctx context.Context, c *ControlPlane, opts KubeProxyOptions) error {
	if err := kp.removeLeftRules(ctx); err != nil {
		return err
	}
	if found, err := hostKubeProxyChains(ctx); err != nil {
		return err
	} else if len(found) > 0 {
		return fmt.Errorf("kube-proxy: the host already has kube-proxy rules (%s), which this test did not create: refusing to start", strings.Join(found, ", "))
	}
	if out, err := exec.CommandContext(ctx, "iptables", "-t", "filter", "-N", ownerChain).CombinedOutput(); err != nil {
		return fmt.Errorf("iptables -N %s: %w: %s", ownerChain, err, out)
	}
	kp.owned = true
	// system:kube-proxy is bound to system:node-proxier by the apiserver's
	// default policy, as in a kubeadm cluster.
	kubeconfig, err := c.ClientKubeconfig("kube-proxy", "system:kube-proxy")
	if err != nil {
		return err
	}
	healthz, err := freePort()
	if err != nil {
		return err
	}
	metrics, err := freePort()
	if err != nil {
		return err
	}
	config := filepath.Join(kp.dir, "config.yaml")
	if err := os.WriteFile(config, []byte(kubeProxyConfig(kubeconfig, opts, healthz, metrics)), 0o644); err != nil {
		return err
	}
	kp.proc, err = startProcess("kube-proxy", filepath.Join(c.dir, "logs", "kube-proxy.log"), kp.bin, "--config="+config, "--v=2")
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	return waitProcess(ctx, 2*time.Minute, kp.proc, "kube-proxy", func(ctx context.Context) error {
		_, err := get(ctx, client, fmt.Sprintf("http://127.0.0.1:%d/healthz", healthz), "")
		return err
	})
}

// kubeProxyConfig is kube-proxy's configuration file. It leaves the host's
// settings alone where kube-proxy would otherwise change them for the whole
// machine: conntrack's table size and timeouts (0 keeps them), and
// route_localnet (no NodePorts on 127.0.0.1). Its ports are on loopback.
func kubeProxyConfig(kubeconfig string, opts KubeProxyOptions, healthz, metrics int) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %q
mode: iptables
clusterCIDR: %q
hostnameOverride: %q
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
oomScoreAdj: 0
iptables:
  localhostNodePorts: false
  syncPeriod: 30s
  minSyncPeriod: 0s
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
  udpTimeout: 0s
  udpStreamTimeout: 0s
`, kubeconfig, opts.ClusterCIDR, opts.NodeName, healthz, metrics)
}

// Stop stops kube-proxy and removes every rule it programmed (kube-proxy
// --cleanup: iptables, ipvs and nftables), then lets another test start
// one. The rules are all its own: StartKubeProxy refused to start beside
// others. Safe to call twice.
func (kp *KubeProxy) Stop() error {
	if kp.unlock == nil {
		return nil
	}
	defer func() { kp.unlock(); kp.unlock = nil }()
	var errs []error
	if kp.proc != nil {
		errs = append(errs, kp.proc.stop(stopGrace))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, kp.bin, "--cleanup").CombinedOutput()
		if err != nil {
			errs = append(errs, fmt.Errorf("kube-proxy --cleanup: %w\n%s", err, out))
		}
		// --cleanup keeps KUBE-FIREWALL, the kubelet's once: here it is
		// kube-proxy's, since the host had none when it started.
		errs = append(errs, removeKubeChains(ctx))
		if left, err := hostKubeProxyChains(ctx); err != nil || len(left) > 0 {
			errs = append(errs, fmt.Errorf("kube-proxy --cleanup left %v (%v)", left, err))
		}
	}
	// The owner chain goes last, once its rules are gone (or a later test,
	// finding it, removes what is left).
	if kp.owned && errors.Join(errs...) == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		errs = append(errs, removeOwnerChain(ctx))
	}
	return errors.Join(errs...)
}

// Log is the path of kube-proxy's log.
func (kp *KubeProxy) Log() string { return kp.proc.Log }

// hostKubeProxyChains lists the kube-proxy chains and tables the host has:
// KUBE-* chains in any iptables table (IPv4 and IPv6) and nftables'
// kube-proxy tables.
func hostKubeProxyChains(ctx context.Context) ([]string, error) {
	var found []string
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		out, err := exec.CommandContext(ctx, save).Output()
		if err != nil {
			if save == "ip6tables-save" {
				continue // a host without IPv6 netfilter
			}
			return nil, fmt.Errorf("%s: %w", save, err)
		}
		for _, ch := range kubeProxyChains(string(out)) {
			found = append(found, save+": "+ch)
		}
	}
	if out, err := exec.CommandContext(ctx, "nft", "list", "tables").Output(); err == nil {
		for _, t := range nftKubeProxyTables(string(out)) {
			found = append(found, "nft: "+t)
		}
	}
	return found, nil
}

// kubeletChains are the kubelet's own (its iptables canaries), not
// kube-proxy's.
var kubeletChains = []string{"KUBE-IPTABLES-HINT", "KUBE-KUBELET-CANARY"}

// kubeProxyChains returns the table-qualified KUBE-* chains that
// iptables-save's output declares, less the kubelet's.
func kubeProxyChains(save string) []string {
	var chains []string
	table := ""
	sc := bufio.NewScanner(strings.NewReader(save))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case strings.HasPrefix(line, ":KUBE-"):
			name, _, _ := strings.Cut(line[1:], " ")
			if !slices.Contains(kubeletChains, name) {
				chains = append(chains, table+"/"+name)
			}
		}
	}
	return chains
}

// nftKubeProxyTables returns the tables named kube-proxy in `nft list
// tables` output ("table ip kube-proxy").
func nftKubeProxyTables(list string) []string {
	var tables []string
	for _, line := range strings.Split(list, "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "table" && f[2] == "kube-proxy" {
			tables = append(tables, f[1]+" "+f[2])
		}
	}
	return tables
}

// removeKubeChains removes the KUBE-* chains (less the kubelet's) that
// iptables and ip6tables still have, with the rules that jump to them.
func removeKubeChains(ctx context.Context) error {
	var errs []error
	for _, cmd := range [][2]string{{"iptables-save", "iptables-restore"}, {"ip6tables-save", "ip6tables-restore"}} {
		out, err := exec.CommandContext(ctx, cmd[0]).Output()
		if err != nil {
			continue // a host without that family's netfilter
		}
		script := removalScript(string(out))
		if script == "" {
			continue
		}
		restore := exec.CommandContext(ctx, cmd[1], "--noflush")
		restore.Stdin = strings.NewReader(script)
		if out, err := restore.CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w: %s\n%s", cmd[1], err, out, script))
		}
	}
	return errors.Join(errs...)
}

// removalScript is an iptables-restore --noflush script that removes, from
// iptables-save's output save, every KUBE-* chain kubeProxyChains finds and
// every rule of another chain that jumps to one; "" when there are none.
func removalScript(save string) string {
	var b strings.Builder
	for _, tb := range strings.Split(save, "\n*") {
		tb = strings.TrimPrefix(tb, "*")
		table, body, _ := strings.Cut(tb, "\n")
		chains := kubeProxyChains("*" + table + "\n" + body)
		if len(chains) == 0 {
			continue
		}
		fmt.Fprintf(&b, "*%s\n", table)
		ours := map[string]bool{}
		var names []string
		for _, ch := range chains {
			name := strings.TrimPrefix(ch, table+"/")
			ours[name] = true
			names = append(names, name)
		}
		for _, line := range strings.Split(body, "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || f[0] != "-A" || ours[f[1]] {
				continue
			}
			if i := slices.Index(f, "-j"); i >= 0 && i+1 < len(f) && ours[f[i+1]] {
				fmt.Fprintf(&b, "-D %s\n", strings.Join(f[1:], " "))
			}
		}
		for _, ch := range names {
			fmt.Fprintf(&b, "-F %s\n", ch)
		}
		for _, ch := range names {
			fmt.Fprintf(&b, "-X %s\n", ch)
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}
