package dra

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"

	"github.com/berth-dev/berth/internal/pluginmanager"
)

// The gRPC services of k8s.io/kubelet/pkg/apis/dra the v1.36 kubelet
// speaks, the preferred first.
var supportedServices = []string{drapb.DRAPluginService, drapbv1beta1.DRAPluginService}

// driverClient is the part of a DRA driver's gRPC API the manager calls,
// in v1's types whatever version the driver speaks.
type driverClient interface {
	NodePrepareResources(ctx context.Context, req *drapb.NodePrepareResourcesRequest, opts ...grpc.CallOption) (*drapb.NodePrepareResourcesResponse, error)
	NodeUnprepareResources(ctx context.Context, req *drapb.NodeUnprepareResourcesRequest, opts ...grpc.CallOption) (*drapb.NodeUnprepareResourcesResponse, error)
}

// chooseService picks the service berth will call from the ones a driver
// lists: v1 where offered, else v1beta1. The kubelet takes the first of
// the driver's list it knows; berth prefers v1 whatever the order, since a
// driver offering both serves both.
func chooseService(offered []string) (string, error) {
	if len(offered) == 0 {
		return "", errors.New("empty list of supported gRPC services (aka supported versions)")
	}
	for _, s := range supportedServices {
		if slices.Contains(offered, s) {
			return s, nil
		}
	}
	return "", fmt.Errorf("none of services supported by the plugin (%q) are supported by the kubelet (%q)", offered, supportedServices)
}

// plugin is a registered driver's connection.
type plugin struct {
	endpoint string
	service  string
	conn     *grpc.ClientConn
	client   driverClient
}

// Plugins holds the registered DRA drivers by name. It is the Handler the
// plugin manager calls for plugins of type DRAPlugin.
//
// A driver may have several instances registered at once, each at its own
// endpoint: during a rolling update the new instance registers before the
// old one goes. As in the kubelet (DRAPluginManager), calls go to the
// instance registered last, and when an instance goes the one before it
// serves again (a new instance that fails leaves the old one in charge).
type Plugins struct {
	log         *slog.Logger
	dialTimeout time.Duration

	mu sync.Mutex
	// drivers holds each driver's instances, the last registered last.
	drivers map[string][]*plugin
}

var _ pluginmanager.Handler = (*Plugins)(nil)

// NewPlugins returns an empty registry. dialTimeout bounds the wait for a
// driver's endpoint to accept a connection at registration (10s if 0).
func NewPlugins(log *slog.Logger, dialTimeout time.Duration) *Plugins {
	if dialTimeout <= 0 {
		dialTimeout = 10 * time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Plugins{log: log, dialTimeout: dialTimeout, drivers: map[string][]*plugin{}}
}

// ValidatePlugin refuses a driver none of whose services berth speaks.
func (p *Plugins) ValidatePlugin(name, endpoint string, versions []string) error {
	if name == "" {
		return fmt.Errorf("DRA driver plugin at endpoint %s: DRA driver name is empty", endpoint)
	}
	if _, err := chooseService(versions); err != nil {
		return fmt.Errorf("invalid supported gRPC versions of DRA driver plugin %s at endpoint %s: %w", name, endpoint, err)
	}
	return nil
}

// RegisterPlugin connects to the driver's endpoint and records it as the
// driver's newest instance, replacing (and closing) a connection to the same
// endpoint (the kubelet refuses that; a driver that restarted in place is
// taken back instead).
func (p *Plugins) RegisterPlugin(ctx context.Context, name, endpoint string, versions []string) error {
	service, err := chooseService(versions)
	if err != nil {
		return fmt.Errorf("invalid supported gRPC versions of DRA driver plugin %s at endpoint %s: %w", name, endpoint, err)
	}
	conn, err := dial(ctx, endpoint, p.dialTimeout)
	if err != nil {
		return fmt.Errorf("connect to DRA driver %s plugin at endpoint %s: %w", name, endpoint, err)
	}
	np := &plugin{endpoint: endpoint, service: service, conn: conn}
	if service == drapbv1beta1.DRAPluginService {
		np.client = drapbv1beta1.V1Beta1ClientWrapper{DRAPluginClient: drapbv1beta1.NewDRAPluginClient(conn)}
	} else {
		np.client = drapb.NewDRAPluginClient(conn)
	}
	p.mu.Lock()
	var old *plugin
	instances := p.drivers[name]
	if i := slices.IndexFunc(instances, func(pl *plugin) bool { return pl.endpoint == endpoint }); i >= 0 {
		old = instances[i]
		instances = slices.Delete(slices.Clone(instances), i, i+1)
	}
	p.drivers[name] = append(instances, np)
	p.mu.Unlock()
	if old != nil {
		p.closeConn(name, old)
	}
	p.log.Info("registered DRA driver", "driver", name, "endpoint", endpoint, "service", service)
	return nil
}

// DeRegisterPlugin forgets the driver's instance at endpoint; the driver
// stays registered while another instance is.
func (p *Plugins) DeRegisterPlugin(_ context.Context, name, endpoint string) {
	p.mu.Lock()
	instances := p.drivers[name]
	i := slices.IndexFunc(instances, func(pl *plugin) bool { return pl.endpoint == endpoint })
	if i < 0 {
		p.mu.Unlock()
		return
	}
	old := instances[i]
	if len(instances) == 1 {
		delete(p.drivers, name)
	} else {
		p.drivers[name] = slices.Delete(slices.Clone(instances), i, i+1)
	}
	left := len(instances) - 1
	p.mu.Unlock()
	p.closeConn(name, old)
	p.log.Info("deregistered DRA driver", "driver", name, "endpoint", endpoint, "instancesLeft", left)
}

func (p *Plugins) closeConn(name string, pl *plugin) {
	if err := pl.conn.Close(); err != nil {
		p.log.Warn("closing DRA driver connection", "driver", name, "endpoint", pl.endpoint, "err", err)
	}
}

// driver returns the registered driver's client, with the kubelet's error.
func (p *Plugins) driver(name string) (driverClient, error) {
	if name == "" {
		return nil, errors.New("DRA driver name is empty")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	instances := p.drivers[name]
	if len(instances) == 0 {
		return nil, fmt.Errorf("DRA driver %s is not registered", name)
	}
	return instances[len(instances)-1].client, nil
}

// Registered returns the names of the registered drivers, sorted.
func (p *Plugins) Registered() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	names := make([]string, 0, len(p.drivers))
	for n := range p.drivers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Close closes every connection; the registry is empty afterwards.
func (p *Plugins) Close() {
	p.mu.Lock()
	drivers := p.drivers
	p.drivers = map[string][]*plugin{}
	p.mu.Unlock()
	for name, instances := range drivers {
		for _, pl := range instances {
			p.closeConn(name, pl)
		}
	}
}

// dial connects to a unix socket and waits until the connection is ready
// or the timeout or ctx ends: a driver that registers serves its endpoint
// already, and a dead endpoint is better refused at registration than
// found at the first pod.
func dial(ctx context.Context, endpoint string, timeout time.Duration) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient("unix:"+endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn.Connect()
	for {
		s := conn.GetState()
		if s == connectivity.Ready {
			return conn, nil
		}
		if !conn.WaitForStateChange(ctx, s) {
			_ = conn.Close()
			return nil, fmt.Errorf("not ready (%s): %w", s, ctx.Err())
		}
	}
}
