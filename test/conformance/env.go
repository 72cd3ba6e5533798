package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/test/cluster"
)

// EnvConfig is what StartEnv needs.
type EnvConfig struct {
	Cluster  cluster.Binaries
	Addons   *cluster.Addons // kube-proxy and CoreDNS: Services and cluster DNS; none if nil
	BerthBin string          // directory of berth and berth-pause
	// Containerd is the directory of the containerd the nodes manage; ""
	// for the host's.
	Containerd string
	Images     []string // image tarballs every node imports
	Nodes      int      // how many berth nodes; 2 if zero
	Log        io.Writer
}

// Env is a control plane of test/cluster with berth nodes joined to it,
// and kube-proxy and CoreDNS for their Services and cluster DNS.
type Env struct {
	CP       *cluster.ControlPlane
	Proxy    *cluster.KubeProxy
	DNS      *cluster.CoreDNS
	Nodes    []*Node
	Registry *Registry // the images, as a mirror of registry.k8s.io
	reject   *serviceReject
	hostDirs *hostDirs // draHostDirs before the run
	bins     cluster.Binaries
	dir      string
	net      *nodeNet
}

// nodeReadyTimeout bounds a node's start: containerd, the image imports
// (tens of MB each) and the registration.
const nodeReadyTimeout = 3 * time.Minute

// StartEnv starts the control plane and the nodes and returns once every
// Node is Ready. On error everything started is stopped and removed again.
func StartEnv(ctx context.Context, cfg EnvConfig) (*Env, error) {
	if cfg.Nodes == 0 {
		cfg.Nodes = 2
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	// What runs killed before their Stop left goes first: their addresses,
	// rules and bridges can be in this run's way.
	if err := reapDead(ctx, cfg.BerthBin, cfg.Log); err != nil {
		return nil, fmt.Errorf("remove what killed runs left: %w", err)
	}
	dir, err := os.MkdirTemp("/tmp", "berth-conf-cp-")
	if err != nil {
		return nil, fmt.Errorf("control plane dir: %w", err)
	}
	e := &Env{dir: dir, bins: cfg.Cluster}
	if e.hostDirs, err = snapshotHostDirs(draHostDirs); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := e.start(ctx, cfg); err != nil {
		if cerr := e.Stop(); cerr != nil {
			fmt.Fprintf(cfg.Log, "conformance: %v\n", cerr)
		}
		return nil, err
	}
	return e, nil
}

func (e *Env) start(ctx context.Context, cfg EnvConfig) error {
	// One address per node, and the last for the API server: recorded
	// before they are added, so that a run killed from here on can have
	// them removed by the next (reapDead).
	net := planNodeNet(cfg.Nodes + 1)
	if err := writeOwner(e.dir, envOwner{IPs: net.ips, HostDirs: e.hostDirs.before}); err != nil {
		return err
	}
	if err := net.add(ctx); err != nil {
		return fmt.Errorf("the nodes' addresses: %w", err)
	}
	e.net = net
	fmt.Fprintf(cfg.Log, "conformance: starting the control plane in %s\n", e.dir)
	cp, err := cluster.Start(ctx, cfg.Cluster, e.dir, cluster.Options{APIServerArgs: apiServerArgs(e.net.ips[cfg.Nodes])})
	if err != nil {
		return fmt.Errorf("start the control plane: %w", err)
	}
	e.CP = cp
	if e.Registry, err = StartRegistry(ctx, cfg.Images); err != nil {
		return err
	}
	base := 2 * rand.IntN(120)
	for i := range cfg.Nodes {
		n, err := StartNode(ctx, cp, NodeConfig{
			Name:       nodeName(i),
			IP:         e.net.ips[i],
			Index:      i,
			CIDRBase:   base,
			BerthBin:   cfg.BerthBin,
			Containerd: cfg.Containerd,
			Images:     cfg.Images,
			Mirror:     e.Registry,
			// The kube-dns Service, which kube-proxy makes reachable.
			ClusterDNS: cfg.Addons != nil,
		})
		if err != nil {
			return err
		}
		e.Nodes = append(e.Nodes, n)
		fmt.Fprintf(cfg.Log, "conformance: started node %s at %s:%d (root %s)\n", n.Name, n.IP, n.Port, n.Root)
	}
	for _, n := range e.Nodes {
		if err := e.waitReady(ctx, n); err != nil {
			return err
		}
	}
	if cfg.Addons == nil {
		return nil
	}
	// As TestClusterNetwork does: kube-proxy acts for a Node that exists.
	return e.startAddons(ctx, cfg)
}

// apiServerArgs make the API server publish itself as the kubernetes
// Service's endpoint, as a cluster's does (the sig-network spec "should
// have Endpoints and EndpointSlices pointing to API Server"): test/cluster
// turns the endpoint reconciler off because it advertises 127.0.0.1, which
// an Endpoints object may not hold. Here it advertises ip, an address of
// lo that pods reach through kube-proxy, and listens on every address (its
// clients need a token or a certificate; 127.0.0.1 stays the run's own
// address of it).
//
// It also serves resource.k8s.io/v1beta1 and v1beta2, which v1.36 serves
// only when asked: the DRA specs "with v1beta1 API" and "with v1beta2 API"
// create their claims through them, as older DRA clients still do, and
// check that the node runs such pods (berth reads the v1 form the server
// converts them to).
func apiServerArgs(ip string) []string {
	return []string{"--advertise-address=" + ip, "--bind-address=0.0.0.0", "--endpoint-reconciler-type=lease",
		"--runtime-config=resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true"}
}

// podCIDRs holds every node's pod CIDR, 10.215.x.0/24 (NodeConfig).
const podCIDRs = "10.215.0.0/16"

// startAddons starts kube-proxy (one for the machine's netfilter, which
// every node shares; it acts for the first node) and CoreDNS behind the
// kube-dns Service at cluster.ClusterDNSIP, which the nodes give their
// pods as their resolver.
func (e *Env) startAddons(ctx context.Context, cfg EnvConfig) error {
	fmt.Fprintf(cfg.Log, "conformance: starting kube-proxy and CoreDNS\n")
	var err error
	if e.reject, err = addServiceReject(ctx, filepath.Base(e.dir)); err != nil {
		return err
	}
	e.Proxy, err = e.CP.StartKubeProxy(ctx, cfg.Addons.KubeProxy, cluster.KubeProxyOptions{ClusterCIDR: podCIDRs, NodeName: nodeName(0)})
	if err != nil {
		return fmt.Errorf("start kube-proxy: %w", err)
	}
	if e.DNS, err = e.CP.StartCoreDNS(ctx, cfg.Addons.CoreDNS); err != nil {
		return fmt.Errorf("start CoreDNS: %w", err)
	}
	return nil
}

func nodeName(i int) string { return fmt.Sprintf("berth-conf-%d", i+1) }

// waitReady waits until n's Node is Ready, failing early when berth exits.
func (e *Env) waitReady(ctx context.Context, n *Node) error {
	client, err := e.CP.Client()
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, nodeReadyTimeout)
	defer cancel()
	last := "not registered"
	for {
		if n.Exited() {
			return fmt.Errorf("node %s: berth exited during start-up:\n%s", n.Name, n.LogTail(4000))
		}
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		node, err := client.CoreV1().Nodes().Get(cctx, n.Name, metav1.GetOptions{})
		ccancel()
		if err == nil && ready(node) {
			return nil
		}
		if err == nil {
			last = fmt.Sprintf("conditions %v", node.Status.Conditions)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s not Ready (%s): %w\n%s", n.Name, last, ctx.Err(), n.LogTail(4000))
		case <-time.After(time.Second):
		}
	}
}

func ready(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// OnlyFirstNode cordons every node but the first for a pass that needs
// it alone schedulable (Pass.OneNode) and returns what uncordons them.
func (e *Env) OnlyFirstNode(ctx context.Context) (func(context.Context) error, error) {
	var names []string
	for _, n := range e.Nodes[1:] {
		names = append(names, n.Name)
	}
	set := func(ctx context.Context, verb string) error {
		if len(names) == 0 {
			return nil
		}
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if _, stderr, err := e.CP.Kubectl(ctx, append([]string{verb}, names...)...); err != nil {
			return fmt.Errorf("kubectl %s %v: %w: %s", verb, names, err, stderr)
		}
		return nil
	}
	if err := set(ctx, "cordon"); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return set(ctx, "uncordon") }, nil
}

// Kubeconfig is the admin's kubeconfig, for e2e.test.
func (e *Env) Kubeconfig() string { return e.CP.AdminKubeconfig() }

// Kubectl is the kubectl built with the control plane.
func (e *Env) Kubectl() string { return e.bins.Kubectl }

// SaveLogs copies the control plane's and the nodes' logs into dir.
func (e *Env) SaveLogs(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var errs []error
	if e.CP != nil {
		for _, p := range e.CP.Processes() {
			errs = append(errs, copyFile(p.Log, filepath.Join(dir, filepath.Base(p.Log))))
		}
	}
	if e.Proxy != nil {
		errs = append(errs, copyFile(e.Proxy.Log(), filepath.Join(dir, "kube-proxy.log")))
	}
	if e.DNS != nil {
		errs = append(errs, copyFile(e.DNS.Log(), filepath.Join(dir, "coredns.log")))
	}
	for _, n := range e.Nodes {
		errs = append(errs, copyFile(n.Log, filepath.Join(dir, n.Name+".log")))
	}
	return errors.Join(errs...)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Close()
}

// Stop stops and removes the nodes, then the control plane, its directory
// and the nodes' addresses. It keeps going past errors and returns them.
func (e *Env) Stop() error {
	var errs []error
	for i := len(e.Nodes) - 1; i >= 0; i-- {
		errs = append(errs, e.Nodes[i].Cleanup())
	}
	e.Nodes = nil
	// The DRA specs' driver pods, gone with the nodes, leave their
	// directories, sockets and CDI specs on the host.
	if e.hostDirs != nil {
		errs = append(errs, e.hostDirs.remove(draHostDirs))
		e.hostDirs = nil
	}
	// kube-proxy removes its rules; CoreDNS its Service.
	if e.DNS != nil {
		errs = append(errs, e.DNS.Stop())
		e.DNS = nil
	}
	if e.Proxy != nil {
		errs = append(errs, e.Proxy.Stop())
		e.Proxy = nil
	}
	if e.reject != nil {
		e.reject.remove()
		e.reject = nil
	}
	if e.CP != nil {
		e.CP.Stop()
	}
	if e.net != nil {
		e.net.remove()
		e.net = nil
	}
	if e.Registry != nil {
		errs = append(errs, e.Registry.Close())
		e.Registry = nil
	}
	errs = append(errs, os.RemoveAll(e.dir))
	return errors.Join(errs...)
}
