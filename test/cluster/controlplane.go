package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// The cluster's fixed network: services get 10.0.0.0/24, whose first address
// is the kubernetes Service's, so the apiserver's certificate names it.
const (
	serviceCIDR      = "10.0.0.0/24"
	kubernetesSvcIP  = "10.0.0.1"
	saIssuer         = "https://kubernetes.default.svc.cluster.local"
	defaultNodeGrace = 20 * time.Second
	stopGrace        = 5 * time.Second
)

// Options tune a control plane; the zero value suits most tests.
type Options struct {
	// NodeMonitorGracePeriod is how long a Node may go without a status
	// update before the node lifecycle controller marks it NotReady.
	// Default 20s, so a stopped node goes NotReady quickly.
	NodeMonitorGracePeriod time.Duration
	// KubeletCertificateAuthority is a CA bundle the apiserver verifies
	// nodes' serving certificates with when it calls their port 10250.
	// Empty leaves them unverified: berth nodes serve self-signed ones.
	KubeletCertificateAuthority string
	// ClusterSigningDuration is the lifetime of the certificates the
	// controller-manager signs for CSRs (--cluster-signing-duration):
	// short ones make nodes rotate theirs within a test. Default: the
	// controller-manager's (a year).
	ClusterSigningDuration time.Duration
	// Extra flags for each component, after (so overriding) the harness's.
	APIServerArgs, ControllerManagerArgs, SchedulerArgs []string
}

// ControlPlane is a running etcd, kube-apiserver, kube-controller-manager
// and kube-scheduler, all on 127.0.0.1, all files under one directory.
type ControlPlane struct {
	dir        string
	bins       Binaries
	opts       Options
	server     string
	adminToken string
	ca         *authority // signs the apiserver's serving certificate
	clientCA   *authority // signs every client certificate
	admin      string     // the admin kubeconfig

	nodeMu sync.Mutex // NodeKubeconfig writes files named after the node

	// lifeMu orders Stop, StopAPIServer and StartAPIServer, so that no
	// program is started after Stop nor signalled by two of them at once.
	lifeMu  sync.Mutex
	stopped bool     // Stop has run
	apiArgs []string // kube-apiserver's command line, for StartAPIServer

	// procMu guards procs only, never across a wait, so that LogTails and
	// Processes answer while a program is being stopped or started.
	procMu sync.Mutex
	procs  []*process // the latest run of each program, in start order
}

// Start brings up a control plane with all its files under dir (which the
// caller owns and removes, e.g. t.TempDir) and returns once the apiserver is
// ready, the controller-manager and scheduler are healthy and the
// controller-manager has created the default ServiceAccount. ctx bounds
// start-up only: the control plane runs until Stop. On error everything
// started is stopped again.
func Start(ctx context.Context, bins Binaries, dir string, opts Options) (*ControlPlane, error) {
	if opts.NodeMonitorGracePeriod == 0 {
		opts.NodeMonitorGracePeriod = defaultNodeGrace
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{"pki", "kubeconfig", "logs", "certs", "nodes"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	token := make([]byte, 16)
	if _, err := rand.Read(token); err != nil {
		return nil, err
	}
	c := &ControlPlane{dir: dir, bins: bins, opts: opts, adminToken: hex.EncodeToString(token)}
	if err := c.start(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *ControlPlane) start(ctx context.Context) error {
	certs, err := c.writePKI()
	if err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	etcd, err := c.startEtcd(ctx)
	if err != nil {
		return err
	}
	if err := c.startAPIServer(ctx, etcd, certs); err != nil {
		return err
	}
	kcmConfig, schedConfig, err := c.writeKubeconfigs(certs)
	if err != nil {
		return fmt.Errorf("kubeconfigs: %w", err)
	}
	kcm, err := c.startControllerManager(ctx, kcmConfig, certs)
	if err != nil {
		return err
	}
	if _, err := c.startScheduler(ctx, schedConfig); err != nil {
		return err
	}
	if err := c.bootstrapRBAC(ctx); err != nil {
		return fmt.Errorf("bootstrap RBAC: %w", err)
	}
	// The controller-manager is healthy long before its controllers have
	// done anything; this proves they can act, with their own credentials.
	return c.waitUntil(ctx, time.Minute, kcm, "the default ServiceAccount", c.defaultServiceAccount)
}

// Stop stops the control plane, last started first: SIGTERM to each
// process group, SIGKILL after a few seconds, and waits for each to be
// reaped. A program already stopped (StopAPIServer) is not signalled again.
// It removes nothing: dir is the caller's. Safe to call twice.
func (c *ControlPlane) Stop() {
	c.lifeMu.Lock()
	defer c.lifeMu.Unlock()
	if c.stopped {
		return
	}
	c.stopped = true
	procs := c.snapshot()
	for i := len(procs) - 1; i >= 0; i-- {
		_ = procs[i].stop(stopGrace) // best effort: the rest must go too
	}
}

// StopAPIServer stops kube-apiserver only, as Stop would, and returns once
// it has been reaped; etcd keeps the cluster's data and the other
// components keep running (and logging that they cannot reach it).
// Stopping a stopped apiserver does nothing.
func (c *ControlPlane) StopAPIServer() error {
	c.lifeMu.Lock()
	defer c.lifeMu.Unlock()
	p := c.latest(apiServerName)
	if p == nil {
		return errors.New("stop kube-apiserver: it was never started")
	}
	if err := p.stop(stopGrace); err != nil {
		return fmt.Errorf("stop kube-apiserver: %w", err)
	}
	return nil
}

// StartAPIServer starts kube-apiserver again after StopAPIServer, with the
// same command line: same port, certificates and etcd, so Server, the
// kubeconfigs and every client stay valid. It returns once /readyz answers
// 200, or fails with the end of its log. The new run's output is appended
// to the same log file. ctx bounds the start only.
func (c *ControlPlane) StartAPIServer(ctx context.Context) error {
	p, err := c.restartAPIServer()
	if err != nil {
		return err
	}
	// Waited for without lifeMu, so a Stop meanwhile is not held up: it
	// stops p, and the wait fails at once.
	return c.waitReadyz(ctx, p)
}

func (c *ControlPlane) restartAPIServer() (*process, error) {
	c.lifeMu.Lock()
	defer c.lifeMu.Unlock()
	if c.stopped {
		return nil, errors.New("start kube-apiserver: the control plane is stopped")
	}
	old := c.latest(apiServerName)
	if old == nil {
		return nil, errors.New("start kube-apiserver: it was never started")
	}
	if !old.exited() {
		return nil, fmt.Errorf("start kube-apiserver: it is still running (pid %d); StopAPIServer first", old.Pid)
	}
	// It may have exited on its own rather than through StopAPIServer:
	// stop reaps what is left of its group and closes its log, once.
	if err := old.stop(stopGrace); err != nil {
		return nil, fmt.Errorf("start kube-apiserver: %w", err)
	}
	// One log for all runs; the marker tells them apart.
	mark := fmt.Sprintf("\n===== berth test harness: restarting kube-apiserver at %s =====\n", time.Now().Format(time.RFC3339Nano))
	if err := appendFile(old.Log, mark); err != nil {
		return nil, fmt.Errorf("start kube-apiserver: %w", err)
	}
	return c.run(apiServerName, c.bins.APIServer, c.apiArgs...)
}

// Server is the apiserver's URL, https://127.0.0.1:<port>.
func (c *ControlPlane) Server() string { return c.server }

// CAFile is the CA bundle that verifies the apiserver (also published in
// every namespace's kube-root-ca.crt ConfigMap).
func (c *ControlPlane) CAFile() string { return c.ca.certFile }

// KubeletClientCA is the CA bundle that signed the apiserver's client
// certificate for calls to nodes (CN kube-apiserver-kubelet-client, O
// system:masters): a node's --client-ca-file, to authenticate those calls.
// It signed every other client certificate of the cluster too, node ones
// included, as a kubeadm cluster's CA does.
func (c *ControlPlane) KubeletClientCA() string { return c.clientCA.certFile }

// AdminToken is a bearer token of a member of system:masters.
func (c *ControlPlane) AdminToken() string { return c.adminToken }

// AdminKubeconfig is the path of a kubeconfig for a member of system:masters.
func (c *ControlPlane) AdminKubeconfig() string { return c.admin }

// Dir is the directory holding all the control plane's files.
func (c *ControlPlane) Dir() string { return c.dir }

// Processes are the programs, in start order, with their logs: the latest
// run of each, so after StopAPIServer the apiserver listed has exited.
func (c *ControlPlane) Processes() []Process {
	var ps []Process
	for _, p := range c.snapshot() {
		ps = append(ps, p.Process)
	}
	return ps
}

// LogTails returns the last n lines of every process's log, for a failing
// test's output.
func (c *ControlPlane) LogTails(n int) string {
	var b strings.Builder
	for _, p := range c.snapshot() {
		fmt.Fprintf(&b, "==> %s (%s) <==\n%s\n", p.Name, p.Log, p.logTail(n))
	}
	return b.String()
}

// run starts one program, its output appended to dir/logs/<name>.log. A
// new run of a program takes the place of its previous one in procs.
func (c *ControlPlane) run(name, bin string, args ...string) (*process, error) {
	p, err := startProcess(name, filepath.Join(c.dir, "logs", name+".log"), bin, args...)
	if err != nil {
		return nil, err
	}
	c.procMu.Lock()
	defer c.procMu.Unlock()
	for i, q := range c.procs {
		if q.Name == name {
			c.procs[i] = p
			return p, nil
		}
	}
	c.procs = append(c.procs, p)
	return p, nil
}

// snapshot is a copy of procs, to range over without holding procMu.
func (c *ControlPlane) snapshot() []*process {
	c.procMu.Lock()
	defer c.procMu.Unlock()
	return slices.Clone(c.procs)
}

// latest is the latest run of the program called name, or nil.
func (c *ControlPlane) latest(name string) *process {
	c.procMu.Lock()
	defer c.procMu.Unlock()
	for _, p := range c.procs {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// appendFile appends s to the file at path.
func appendFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(s); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// waitUntil polls check until it succeeds. It fails at once if any process
// exits, and after timeout (or with ctx) with check's last error and the end
// of p's log.
func (c *ControlPlane) waitUntil(ctx context.Context, timeout time.Duration, p *process, what string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		err := check(cctx)
		ccancel()
		if err == nil {
			return nil
		}
		for _, q := range c.snapshot() {
			if q.exited() {
				return fmt.Errorf("waiting for %s: %w", what, q.exitError())
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not ready within %v (last: %v): %w\n%s", what, timeout, err, ctx.Err(), p.logTail(40))
		case <-time.After(250 * time.Millisecond):
		}
	}
}
