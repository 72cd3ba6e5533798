package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultDRADriverName is the DRA test driver's own default --drivername.
const DefaultDRADriverName = "test-driver.cdi.k8s.io"

// draDriverUser is the identity every DRA test driver of a cluster runs as.
const draDriverUser = "berth-test:dra-test-driver"

// DRADriverOptions say where the DRA test driver of one node puts its
// sockets and CDI files. The directories are absolute: the driver hands its
// DRA socket's path to whoever reads its registration socket.
type DRADriverOptions struct {
	// NodeName is the Node the driver publishes its devices for (its
	// ResourceSlices' spec.nodeName and owner). Its slices appear only
	// once that Node exists.
	NodeName string
	// RegistryDir is the node's plugin registration directory (berth's
	// <root>/plugins_registry): the driver's <DriverName>-reg.sock goes there.
	RegistryDir string
	// PluginsDir holds the driver's DRA socket, <PluginsDir>/<DriverName>/dra.sock.
	PluginsDir string
	// CDIDir is where the driver writes a CDI spec for each prepared claim.
	CDIDir string
	// NumDevices is how many devices it publishes (device-00, device-01,
	// ...). 0 means the driver's default, 4.
	NumDevices int
	// DriverName defaults to DefaultDRADriverName.
	DriverName string
}

// DRADriver is the upstream DRA test driver's kubelet plugin
// (k8s.io/kubernetes/test/e2e/dra/test-driver), run as a host process for
// one node.
type DRADriver struct {
	proc *process
	// Name is the driver's name: its ResourceSlices' spec.driver and the
	// vendor of its CDI devices.
	Name string
	// RegistrationSocket is where the node finds it; Endpoint is the DRA
	// socket that the registration names.
	RegistrationSocket, Endpoint string
	CDIDir                       string
}

// validate fills in the defaults of o, or says which field is wrong.
func (o *DRADriverOptions) validate() error {
	if o.DriverName == "" {
		o.DriverName = DefaultDRADriverName
	}
	for _, f := range []struct{ name, value string }{
		{"NodeName", o.NodeName}, {"DriverName", o.DriverName},
	} {
		if f.value == "" || strings.ContainsAny(f.value, "/\x00") || f.value == "." || f.value == ".." {
			return fmt.Errorf("DRA test driver: %s %q: not a name", f.name, f.value)
		}
	}
	for _, f := range []struct{ name, value string }{
		{"RegistryDir", o.RegistryDir}, {"PluginsDir", o.PluginsDir}, {"CDIDir", o.CDIDir},
	} {
		if !filepath.IsAbs(f.value) {
			return fmt.Errorf("DRA test driver: %s %q: not an absolute path", f.name, f.value)
		}
	}
	if o.NumDevices < 0 {
		return fmt.Errorf("DRA test driver: NumDevices %d: negative", o.NumDevices)
	}
	return nil
}

// draDriverRules are the permissions of the upstream deployment of the test
// driver (test/e2e/dra/test-driver/deploy/example/plugin-permissions.yaml):
// its Node's UID for the slices' owner, its ResourceSlices, and the claims
// it prepares. The node-scoped resourceclaims/driver verbs of that file are
// left out: they serve an alpha feature berth's tests do not enable.
func draDriverRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}},
		{APIGroups: []string{resourcev1.GroupName}, Resources: []string{"resourceslices"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{resourcev1.GroupName}, Resources: []string{"resourceclaims"}, Verbs: []string{"get"}},
		{APIGroups: []string{resourcev1.GroupName}, Resources: []string{"resourceclaims/status"}, Verbs: []string{"patch", "update"}},
	}
}

// draDriverArgs is the driver's command line. --kubeconfig and --drivername
// belong to the root command, the rest to kubelet-plugin.
func draDriverArgs(kubeconfig string, o DRADriverOptions) []string {
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--drivername=" + o.DriverName,
		"--v=5",
		"kubelet-plugin",
		"--node-name=" + o.NodeName,
		"--plugin-registration-path=" + o.RegistryDir,
		// The driver appends its name: --datadir is the parent of its own
		// directory, whatever its help says.
		"--datadir=" + o.PluginsDir,
		"--cdi-dir=" + o.CDIDir,
	}
	if o.NumDevices > 0 {
		args = append(args, "--num-devices="+strconv.Itoa(o.NumDevices))
	}
	return args
}

// StartDRATestDriver starts the DRA test driver (bin, from
// Addons.DRATestDriver) for node o.NodeName, logging to
// c.Dir()/logs/dra-test-driver-<node>.log (-<driver> appended for a driver
// not of the default name), and returns once its registration socket
// accepts connections. It runs as a user of its own with the permissions of
// the upstream deployment. ctx bounds the start only.
func (c *ControlPlane) StartDRATestDriver(ctx context.Context, bin string, o DRADriverOptions) (*DRADriver, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	// The driver creates CDIDir and PluginsDir, but neither its own
	// directory under PluginsDir (a hostPath volume upstream) nor the
	// registry, which belongs to the node.
	for _, d := range []string{o.RegistryDir, filepath.Join(o.PluginsDir, o.DriverName), o.CDIDir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, fmt.Errorf("DRA test driver: %w", err)
		}
	}
	cs, err := c.Client()
	if err != nil {
		return nil, err
	}
	if err := grant(ctx, cs, draDriverUser, draDriverRules()); err != nil {
		return nil, err
	}
	base := "dra-test-driver-" + o.NodeName
	if o.DriverName != DefaultDRADriverName {
		base += "-" + o.DriverName
	}
	kubeconfig, err := c.ClientKubeconfig(base, draDriverUser)
	if err != nil {
		return nil, err
	}
	d := &DRADriver{
		Name:               o.DriverName,
		RegistrationSocket: filepath.Join(o.RegistryDir, o.DriverName+"-reg.sock"),
		Endpoint:           filepath.Join(o.PluginsDir, o.DriverName, "dra.sock"),
		CDIDir:             o.CDIDir,
	}
	// The driver prefers $KUBECONFIG to --kubeconfig: the test's must not
	// reach it.
	env := withoutEnv(os.Environ(), "KUBECONFIG")
	d.proc, err = startProcessEnv(base, filepath.Join(c.dir, "logs", base+".log"), bin, env, draDriverArgs(kubeconfig, o)...)
	if err != nil {
		return nil, err
	}
	err = waitProcess(ctx, time.Minute, d.proc, base, func(ctx context.Context) error {
		var dialer net.Dialer
		conn, err := dialer.DialContext(ctx, "unix", d.RegistrationSocket)
		if err != nil {
			return err
		}
		return conn.Close()
	})
	if err != nil {
		d.Stop()
		return nil, err
	}
	return d, nil
}

func withoutEnv(env []string, name string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != name {
			out = append(out, kv)
		}
	}
	return out
}

// Stop stops the driver (SIGTERM: it removes its sockets). Its
// ResourceSlices stay, as they do when a driver's pod goes: removing a gone
// driver's slices is the node's job. Safe to call twice.
func (d *DRADriver) Stop() error {
	if d.proc == nil {
		return nil
	}
	return d.proc.stop(stopGrace)
}

// Log is the path of the driver's log.
func (d *DRADriver) Log() string { return d.proc.Log }

// Exited reports whether the driver has exited, and how (with the end of
// its log) if so.
func (d *DRADriver) Exited() error {
	if !d.proc.exited() {
		return nil
	}
	return d.proc.exitError()
}

// CreateDeviceClass creates DeviceClass name (resource.k8s.io/v1), selecting
// every device of driver. It is the caller's to delete.
func (c *ControlPlane) CreateDeviceClass(ctx context.Context, name, driver string) (*resourcev1.DeviceClass, error) {
	if name == "" || driver == "" {
		return nil, errors.New("device class: name and driver are required")
	}
	cs, err := c.Client()
	if err != nil {
		return nil, err
	}
	class := &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.DeviceClassSpec{
			Selectors: []resourcev1.DeviceSelector{{
				CEL: &resourcev1.CELDeviceSelector{Expression: deviceClassExpression(driver)},
			}},
		},
	}
	created, err := cs.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{})
	if err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("device class %s: already exists: %w", name, err)
		}
		return nil, fmt.Errorf("create device class %s: %w", name, err)
	}
	return created, nil
}

// deviceClassExpression is the CEL selector of driver's devices. A driver
// name is a DNS subdomain, so Go's quoting is CEL's.
func deviceClassExpression(driver string) string {
	return "device.driver == " + strconv.Quote(driver)
}
