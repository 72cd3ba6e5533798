// Command csi-hostpath-driver is a CSI driver whose volumes are
// directories under --state-dir (<state>/volumes/<id>): CreateVolume makes
// one, NodeStageVolume bind-mounts it at the staging path and
// NodePublishVolume bind-mounts that at the target path (read-only if
// asked). What it knows lives in the state directory, so a restarted
// driver still knows its volumes. Given --registration-dir it registers
// with a node as node-driver-registrar does (see ../csi-registrar). It
// serves the identity, controller and node services on one socket, as a
// single-node deployment of upstream's host path driver does.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/berth-dev/berth/test/cluster/tools/csi-registrar"
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// version is what GetPluginInfo reports.
const version = "0.1.0"

type config struct {
	endpoint, name, nodeID, stateDir, regDir string
}

func main() {
	klog.InitFlags(nil)
	var c config
	flag.StringVar(&c.endpoint, "endpoint", "", "the CSI socket: an absolute path, or unix:// and one")
	flag.StringVar(&c.name, "drivername", "", "the driver's name (GetPluginInfo, registration)")
	flag.StringVar(&c.nodeID, "nodeid", "", "the node's ID (NodeGetInfo): the name of its Node")
	flag.StringVar(&c.stateDir, "state-dir", "", "an absolute directory for the volumes and what the driver knows of them")
	flag.StringVar(&c.regDir, "registration-dir", "", "the node's plugin registration directory; none if empty")
	flag.Parse()
	if err := run(c); err != nil {
		klog.ErrorS(err, "csi-hostpath-driver")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func (c *config) validate() error {
	c.endpoint = strings.TrimPrefix(c.endpoint, "unix://")
	if !filepath.IsAbs(c.endpoint) {
		return fmt.Errorf("--endpoint %q: not an absolute unix socket path", c.endpoint)
	}
	if c.name == "" || strings.ContainsAny(c.name, "/\x00") {
		return fmt.Errorf("--drivername %q: not a driver name", c.name)
	}
	if c.nodeID == "" {
		return fmt.Errorf("--nodeid: required")
	}
	if !filepath.IsAbs(c.stateDir) {
		return fmt.Errorf("--state-dir %q: not an absolute path", c.stateDir)
	}
	if c.regDir != "" && !filepath.IsAbs(c.regDir) {
		return fmt.Errorf("--registration-dir %q: not an absolute path", c.regDir)
	}
	return nil
}

func run(c config) error {
	if err := c.validate(); err != nil {
		return err
	}
	st, err := openState(c.stateDir)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	d := &driver{name: c.name, nodeID: c.nodeID, state: st}
	srv := grpc.NewServer(grpc.UnaryInterceptor(logCalls))
	csi.RegisterIdentityServer(srv, d)
	csi.RegisterControllerServer(srv, d)
	csi.RegisterNodeServer(srv, d)
	l, err := registrar.ListenUnix(c.endpoint)
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	defer func() {
		srv.GracefulStop()
		os.Remove(c.endpoint)
	}()
	klog.InfoS("serving CSI", "driver", c.name, "node", c.nodeID, "endpoint", c.endpoint, "state", c.stateDir)

	refused := make(<-chan string)
	if c.regDir != "" {
		reg, err := registrar.Start(c.regDir, c.name, c.endpoint)
		if err != nil {
			return err
		}
		defer reg.Stop()
		refused = reg.Refused()
	}
	select {
	case <-ctx.Done():
	case err := <-served:
		return fmt.Errorf("serve CSI on %s: %w", c.endpoint, err)
	case msg := <-refused:
		// As node-driver-registrar does: exit non-zero, so that whoever
		// runs the driver sees the failure.
		return fmt.Errorf("the node refused the registration: %s", msg)
	}
	klog.InfoS("stopping")
	return nil
}

// logCalls logs every call with how it ended: the log is how a failing
// test sees what the node asked.
func logCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	klog.V(4).InfoS("call", "method", info.FullMethod, "request", req)
	resp, err := handler(ctx, req)
	if err != nil {
		klog.InfoS("call failed", "method", info.FullMethod, "code", status.Code(err), "error", err)
	} else {
		klog.InfoS("call", "method", info.FullMethod)
	}
	return resp, err
}

// driver serves the three CSI services. Every call that changes a volume
// holds mu: calls are few, and one at a time keeps the state simple.
type driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	csi.UnimplementedNodeServer
	name, nodeID string
	state        *state
	mu           sync.Mutex
}

func (d *driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: d.name, VendorVersion: version}, nil
}

func (d *driver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{{
		Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{
			Type: csi.PluginCapability_Service_CONTROLLER_SERVICE,
		}},
	}}}, nil
}

func (d *driver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	if err := d.state.check(); err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "state directory: %v", err)
	}
	return &csi.ProbeResponse{}, nil
}
