// Command csi-mock-driver serves the CSI mock driver of Kubernetes' storage
// e2e tests on a unix socket and, given --registration-dir, registers it
// with a node the way node-driver-registrar does: a socket
// <dir>/<drivername>-reg.sock whose GetInfo names a CSIPlugin, the driver
// and its CSI socket, with CSI version 1.0.0. The driver keeps its volumes
// in memory: NodePublishVolume creates the target directory and mounts
// nothing. Its NodeGetInfo reports the driver's name as the node ID (the
// mock's own choice).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/berth-dev/berth/test/cluster/tools/csi-registrar"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/test/e2e/storage/drivers/csi-test/driver"
	"k8s.io/kubernetes/test/e2e/storage/drivers/csi-test/mock/service"
)

func main() {
	klog.InitFlags(nil)
	endpoint := flag.String("endpoint", "", "the CSI socket: an absolute path, or unix:// and one")
	name := flag.String("drivername", "", "the driver's name (GetPluginInfo, registration)")
	regDir := flag.String("registration-dir", "", "the node's plugin registration directory; none if empty")
	flag.Parse()
	if err := run(*endpoint, *name, *regDir); err != nil {
		klog.ErrorS(err, "csi-mock-driver")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(endpoint, name, regDir string) error {
	sock := strings.TrimPrefix(endpoint, "unix://")
	if !filepath.IsAbs(sock) {
		return fmt.Errorf("--endpoint %q: not an absolute unix socket path", endpoint)
	}
	if name == "" || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("--drivername %q: not a driver name", name)
	}
	if regDir != "" && !filepath.IsAbs(regDir) {
		return fmt.Errorf("--registration-dir %q: not an absolute path", regDir)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	// DisableAttach: no ControllerPublish, as a CSIDriver with
	// attachRequired false tells the node.
	svc := service.New(service.Config{DriverName: name, DisableAttach: true})
	csiDriver := driver.NewCSIDriver(&driver.CSIDriverServers{Controller: svc, Identity: svc, Node: svc})
	l, err := registrar.ListenUnix(sock)
	if err != nil {
		return err
	}
	if err := csiDriver.Start(l, nil); err != nil {
		return fmt.Errorf("serve CSI on %s: %w", sock, err)
	}
	defer os.Remove(sock)
	defer csiDriver.Stop()
	klog.InfoS("serving CSI", "driver", name, "endpoint", sock)

	refused := make(<-chan string)
	if regDir != "" {
		reg, err := registrar.Start(regDir, name, sock)
		if err != nil {
			return err
		}
		defer reg.Stop()
		refused = reg.Refused()
	}
	select {
	case <-ctx.Done():
	case msg := <-refused:
		// As node-driver-registrar does: exit non-zero, so that whoever
		// runs the driver sees the failure.
		return fmt.Errorf("the node refused the registration: %s", msg)
	}
	klog.InfoS("stopping")
	return nil
}
