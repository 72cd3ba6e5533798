package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// csiProvisionerUser is the identity every external-provisioner of a
// cluster runs as.
const csiProvisionerUser = "berth-test:csi-provisioner"

// CSIMockDriverOptions say where the CSI mock driver of one node puts its
// sockets. The directories are absolute: the registration names the CSI
// socket's path.
type CSIMockDriverOptions struct {
	// DriverName is the driver's name (GetPluginInfo, the registration,
	// a StorageClass's provisioner). Give each test its own.
	DriverName string
	// RegistryDir is the node's plugin registration directory (berth's
	// <root>/plugins_registry): <DriverName>-reg.sock goes there. Empty:
	// the driver does not register.
	RegistryDir string
	// PluginsDir holds the CSI socket, <PluginsDir>/<DriverName>/csi.sock,
	// as a kubelet's plugins directory does.
	PluginsDir string
}

// CSIPlugin is a CSI driver run as a host process for one node, with
// the sockets a node finds it by.
type CSIPlugin struct {
	proc *process
	Name string
	// Endpoint is the CSI socket; RegistrationSocket ("" if none) is where
	// the node finds it.
	Endpoint, RegistrationSocket string

	// How to start it (again).
	base, bin, logPath string
	args               []string
}

// CSIMockDriver is the CSI mock driver of Kubernetes' storage e2e tests
// with a registration socket as node-driver-registrar serves one, run as a
// host process for one node. Its volumes live in its memory:
// NodePublishVolume creates the target directory and mounts nothing, and a
// restart forgets them. CSIHostPathDriver is one that mounts.
type CSIMockDriver struct {
	CSIPlugin
}

// checkCSIPluginOptions checks what every CSI driver's options hold.
func checkCSIPluginOptions(what, name, pluginsDir, registryDir string) error {
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return fmt.Errorf("%s: DriverName %q: not a name", what, name)
	}
	if !filepath.IsAbs(pluginsDir) {
		return fmt.Errorf("%s: PluginsDir %q: not an absolute path", what, pluginsDir)
	}
	if registryDir != "" && !filepath.IsAbs(registryDir) {
		return fmt.Errorf("%s: RegistryDir %q: not an absolute path", what, registryDir)
	}
	return nil
}

func (o CSIMockDriverOptions) validate() error {
	return checkCSIPluginOptions("CSI mock driver", o.DriverName, o.PluginsDir, o.RegistryDir)
}

// StartCSIMockDriver starts the CSI mock driver (bin, from
// Addons.CSIMockDriver), logging to c.Dir()/logs/csi-mock-driver-<name>.log,
// and returns once its sockets accept connections. ctx bounds the start
// only.
func (c *ControlPlane) StartCSIMockDriver(ctx context.Context, bin string, o CSIMockDriverOptions) (*CSIMockDriver, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	p, err := c.startCSIPlugin(ctx, bin, "csi-mock-driver", o.DriverName, o.PluginsDir, o.RegistryDir)
	if err != nil {
		return nil, err
	}
	return &CSIMockDriver{CSIPlugin: *p}, nil
}

// CSIHostPathDriverOptions configure the host path CSI driver of one node.
// The directories are absolute.
type CSIHostPathDriverOptions struct {
	// DriverName is the driver's name (GetPluginInfo, the registration,
	// a StorageClass's provisioner). Give each test its own.
	DriverName string
	// NodeID is what NodeGetInfo reports: the node's name.
	NodeID string
	// StateDir holds the volumes, <StateDir>/volumes/<id>, and what the
	// driver knows of them: a driver restarted on it knows them still.
	StateDir string
	// PluginsDir holds the CSI socket, <PluginsDir>/<DriverName>/csi.sock.
	PluginsDir string
	// RegistryDir is the node's plugin registration directory, where
	// <DriverName>-reg.sock goes. Empty: the driver does not register.
	RegistryDir string
}

func (o CSIHostPathDriverOptions) validate() error {
	const what = "CSI host path driver"
	if err := checkCSIPluginOptions(what, o.DriverName, o.PluginsDir, o.RegistryDir); err != nil {
		return err
	}
	if o.NodeID == "" {
		return fmt.Errorf("%s: NodeID: required", what)
	}
	if !filepath.IsAbs(o.StateDir) {
		return fmt.Errorf("%s: StateDir %q: not an absolute path", what, o.StateDir)
	}
	return nil
}

// CSIHostPathDriver is this project's host path CSI driver
// (tools/csi-hostpath-driver) run as a host process for one node: its
// volumes are directories under StateDir, which NodeStageVolume and
// NodePublishVolume bind-mount, and it registers as node-driver-registrar
// would.
type CSIHostPathDriver struct {
	CSIPlugin
	StateDir string
}

// StartCSIHostPathDriver starts the host path CSI driver (bin, from
// Addons.CSIHostPathDriver), logging to
// c.Dir()/logs/csi-hostpath-driver-<name>.log, and returns once its
// sockets accept connections. ctx bounds the start only. The driver runs
// as root: it mounts.
func (c *ControlPlane) StartCSIHostPathDriver(ctx context.Context, bin string, o CSIHostPathDriverOptions) (*CSIHostPathDriver, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	p, err := c.startCSIPlugin(ctx, bin, "csi-hostpath-driver", o.DriverName, o.PluginsDir, o.RegistryDir,
		"--nodeid="+o.NodeID, "--state-dir="+o.StateDir)
	if err != nil {
		return nil, err
	}
	return &CSIHostPathDriver{CSIPlugin: *p, StateDir: o.StateDir}, nil
}

// startCSIPlugin starts program (bin) as the CSI driver name with its
// socket under pluginsDir, registering in registryDir if that is not "",
// with the further flags args.
func (c *ControlPlane) startCSIPlugin(ctx context.Context, bin, program, name, pluginsDir, registryDir string, args ...string) (*CSIPlugin, error) {
	p := &CSIPlugin{Name: name, Endpoint: filepath.Join(pluginsDir, name, "csi.sock"), bin: bin, base: program + "-" + name}
	p.logPath = filepath.Join(c.dir, "logs", p.base+".log")
	dirs := []string{filepath.Dir(p.Endpoint)}
	p.args = append([]string{"--endpoint=unix://" + p.Endpoint, "--drivername=" + name, "--v=5"}, args...)
	if registryDir != "" {
		p.RegistrationSocket = filepath.Join(registryDir, name+"-reg.sock")
		dirs = append(dirs, registryDir)
		p.args = append(p.args, "--registration-dir="+registryDir)
	}
	for _, dir := range dirs {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("%s: %w", program, err)
		}
	}
	if err := p.start(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// start runs the driver and waits for its sockets to accept connections.
func (p *CSIPlugin) start(ctx context.Context) error {
	var err error
	p.proc, err = startProcess(p.base, p.logPath, p.bin, p.args...)
	if err != nil {
		return err
	}
	err = waitProcess(ctx, time.Minute, p.proc, p.base, func(ctx context.Context) error {
		for _, sock := range []string{p.Endpoint, p.RegistrationSocket} {
			if sock == "" {
				continue
			}
			var dialer net.Dialer
			conn, err := dialer.DialContext(ctx, "unix", sock)
			if err != nil {
				return err
			}
			conn.Close()
		}
		return nil
	})
	if err != nil {
		p.Stop()
		return err
	}
	return nil
}

// Restart stops the driver and starts it again as it was started (its
// log goes on in the same file), returning once its sockets accept
// connections. ctx bounds the start only.
func (p *CSIPlugin) Restart(ctx context.Context) error {
	if err := p.Stop(); err != nil {
		return fmt.Errorf("restart %s: %w", p.base, err)
	}
	return p.start(ctx)
}

// Stop stops the driver (SIGTERM: it removes its sockets). Safe to call
// twice.
func (p *CSIPlugin) Stop() error {
	if p.proc == nil {
		return nil
	}
	return p.proc.stop(stopGrace)
}

// Log is the path of the driver's log: every CSI call.
func (p *CSIPlugin) Log() string { return p.logPath }

// CSIProvisionerOptions configure an external-provisioner.
type CSIProvisionerOptions struct {
	// Endpoint is the CSI socket of the driver it provisions for.
	Endpoint string
	// DriverName names its log and kubeconfig; it is the driver's, as
	// GetPluginInfo reports it.
	DriverName string
	// Args are further flags (--feature-gates=Topology=true, say).
	Args []string
}

// CSIProvisioner is the external-provisioner sidecar
// (github.com/kubernetes-csi/external-provisioner) run as a host process.
type CSIProvisioner struct {
	proc *process
}

// csiProvisionerRules are the cluster-wide permissions of upstream's
// deploy/kubernetes/rbac.yaml. Its namespaced ones (leases,
// csistoragecapacities and the pods and replicasets they are owned by)
// serve leader election and capacity tracking, which StartCSIProvisioner
// leaves off.
func csiProvisionerRules() []rbacv1.PolicyRule {
	read := []string{"get", "list", "watch"}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"persistentvolumes"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get", "list", "watch", "update"}},
		{APIGroups: []string{storagev1.GroupName}, Resources: []string{"storageclasses"}, Verbs: read},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"list", "watch", "create", "update", "patch"}},
		{APIGroups: []string{"snapshot.storage.k8s.io"}, Resources: []string{"volumesnapshots", "volumesnapshotcontents"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{storagev1.GroupName}, Resources: []string{"csinodes"}, Verbs: read},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: read},
		{APIGroups: []string{storagev1.GroupName}, Resources: []string{"volumeattachments"}, Verbs: read},
	}
}

// csiProvisionerReady is what the provisioner logs once its informers
// have synced and it provisions.
const csiProvisionerReady = "Started provisioner controller"

// StartCSIProvisioner starts the external-provisioner (bin, from
// Addons.CSIProvisioner) for the driver on o.Endpoint, as a user of its own
// with upstream's permissions, logging to
// c.Dir()/logs/csi-provisioner-<driver>.log, and returns once its
// controller runs. ctx bounds the start only.
func (c *ControlPlane) StartCSIProvisioner(ctx context.Context, bin string, o CSIProvisionerOptions) (*CSIProvisioner, error) {
	if !filepath.IsAbs(o.Endpoint) {
		return nil, fmt.Errorf("CSI provisioner: Endpoint %q: not an absolute path", o.Endpoint)
	}
	if o.DriverName == "" || strings.ContainsAny(o.DriverName, "/\x00") {
		return nil, fmt.Errorf("CSI provisioner: DriverName %q: not a name", o.DriverName)
	}
	cs, err := c.Client()
	if err != nil {
		return nil, err
	}
	if err := grant(ctx, cs, csiProvisionerUser, csiProvisionerRules()); err != nil {
		return nil, err
	}
	base := "csi-provisioner-" + o.DriverName
	kubeconfig, err := c.ClientKubeconfig(base, csiProvisionerUser)
	if err != nil {
		return nil, err
	}
	args := append([]string{"--csi-address=" + o.Endpoint, "--kubeconfig=" + kubeconfig, "--v=5"}, o.Args...)
	p := &CSIProvisioner{}
	p.proc, err = startProcessEnv(base, filepath.Join(c.dir, "logs", base+".log"), bin, withoutEnv(os.Environ(), "KUBECONFIG"), args...)
	if err != nil {
		return nil, err
	}
	err = waitProcess(ctx, 2*time.Minute, p.proc, base, func(context.Context) error {
		data, err := os.ReadFile(p.proc.Log)
		if err != nil {
			return err
		}
		if !bytes.Contains(data, []byte(csiProvisionerReady)) {
			return errors.New("its controller has not started")
		}
		return nil
	})
	if err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// Stop stops the provisioner. Safe to call twice.
func (p *CSIProvisioner) Stop() error {
	if p.proc == nil {
		return nil
	}
	return p.proc.stop(stopGrace)
}

// Log is the path of the provisioner's log.
func (p *CSIProvisioner) Log() string { return p.proc.Log }

// CreateCSIDriver creates the CSIDriver object of driver as upstream's host
// path deployment does: no attach, pod information on mount, persistent
// and inline ephemeral volumes, fsGroup applied by the node to the files.
// It is the caller's to delete.
func (c *ControlPlane) CreateCSIDriver(ctx context.Context, driver string) (*storagev1.CSIDriver, error) {
	cs, err := c.Client()
	if err != nil {
		return nil, err
	}
	obj := &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: driver},
		Spec: storagev1.CSIDriverSpec{
			AttachRequired: ptr.To(false),
			PodInfoOnMount: ptr.To(true),
			FSGroupPolicy:  ptr.To(storagev1.FileFSGroupPolicy),
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{
				storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral,
			},
		},
	}
	created, err := cs.StorageV1().CSIDrivers().Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("CSIDriver %s: already exists: %w", driver, err)
		}
		return nil, fmt.Errorf("create CSIDriver %s: %w", driver, err)
	}
	return created, nil
}

// CreateStorageClass creates StorageClass name whose volumes driver
// provisions, bound as mode says, deleted with their claims. It is the
// caller's to delete.
func (c *ControlPlane) CreateStorageClass(ctx context.Context, name, driver string, mode storagev1.VolumeBindingMode) (*storagev1.StorageClass, error) {
	if name == "" || driver == "" {
		return nil, errors.New("storage class: name and driver are required")
	}
	cs, err := c.Client()
	if err != nil {
		return nil, err
	}
	obj := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       driver,
		ReclaimPolicy:     ptr.To(v1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: &mode,
	}
	created, err := cs.StorageV1().StorageClasses().Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create StorageClass %s: %w", name, err)
	}
	return created, nil
}
