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
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"google.golang.org/grpc"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
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
	l, err := listenUnix(sock)
	if err != nil {
		return err
	}
	if err := csiDriver.Start(l, nil); err != nil {
		return fmt.Errorf("serve CSI on %s: %w", sock, err)
	}
	defer os.Remove(sock)
	defer csiDriver.Stop()
	klog.InfoS("serving CSI", "driver", name, "endpoint", sock)

	if regDir != "" {
		regSock := filepath.Join(regDir, name+"-reg.sock")
		rl, err := listenUnix(regSock)
		if err != nil {
			return err
		}
		srv := grpc.NewServer()
		registerapi.RegisterRegistrationServer(srv, &registration{name: name, endpoint: sock})
		go func() {
			if err := srv.Serve(rl); err != nil {
				klog.ErrorS(err, "registration server")
			}
		}()
		defer os.Remove(regSock)
		defer srv.Stop()
		klog.InfoS("serving registration", "socket", regSock)
	}
	<-ctx.Done()
	klog.InfoS("stopping")
	return nil
}

// listenUnix listens on path, replacing a socket a killed run left there.
func listenUnix(path string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove the old socket: %w", err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return l, nil
}

// registration answers a kubelet's plugin watcher as node-driver-registrar
// does.
type registration struct {
	registerapi.UnimplementedRegistrationServer
	name, endpoint string
}

func (r *registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              r.name,
		Endpoint:          r.endpoint,
		SupportedVersions: []string{"1.0.0"},
	}, nil
}

// NotifyRegistrationStatus exits on a refused registration, as
// node-driver-registrar does, so that whoever runs it sees the failure.
func (r *registration) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if !st.PluginRegistered {
		klog.ErrorS(nil, "registration refused", "error", st.Error)
		klog.Flush()
		os.Exit(1)
	}
	klog.InfoS("registered")
	return &registerapi.RegistrationStatusResponse{}, nil
}
