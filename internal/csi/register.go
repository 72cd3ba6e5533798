package csi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/util/version"
)

// Driver is a registered CSI driver, as it described itself.
type Driver struct {
	Name     string
	Endpoint string
	// Version is the highest CSI version both sides speak.
	Version string
	// NodeID, MaxVolumes (0: no limit) and Topology are its NodeGetInfo.
	NodeID       string
	MaxVolumes   int64
	Topology     map[string]string
	Capabilities Capabilities
}

// NodeInfoSink takes the drivers' entries of this node's CSINode object
// (and the topology labels the kubelet puts on the Node). Cluster mode
// updates the API objects; standalone mode may keep them in memory.
type NodeInfoSink interface {
	InstallDriver(ctx context.Context, driver storagev1.CSINodeDriver, topology map[string]string) error
	UninstallDriver(ctx context.Context, name string) error
}

// csiNodeDriver is a driver's CSINode entry, as the kubelet's
// nodeinfomanager makes it.
func csiNodeDriver(d Driver) storagev1.CSINodeDriver {
	e := storagev1.CSINodeDriver{
		Name:         d.Name,
		NodeID:       d.NodeID,
		TopologyKeys: slices.Sorted(maps.Keys(d.Topology)),
	}
	if d.MaxVolumes > 0 {
		n := int32(min(d.MaxVolumes, int64(1<<31-1)))
		e.Allocatable = &storagev1.VolumeNodeResources{Count: &n}
	}
	return e
}

// entry is a registered driver and its connection.
type entry struct {
	info    Driver
	version *version.Version
	conn    nodeConn
}

// ErrDriverNotRegistered is wrapped by the errors of operations on a driver
// that is not (or no longer) registered.
var ErrDriverNotRegistered = errors.New("CSI driver is not registered")

func (m *Manager) lookup(name string) (*entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.drivers[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrDriverNotRegistered, name)
	}
	return e, nil
}

// Drivers are the registered drivers, sorted by name.
func (m *Manager) Drivers() []Driver {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Driver, 0, len(m.drivers))
	for _, name := range slices.Sorted(maps.Keys(m.drivers)) {
		d := m.drivers[name].info
		d.Topology = maps.Clone(d.Topology)
		out = append(out, d)
	}
	return out
}

func (m *Manager) registeredVersion(name string) *version.Version {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.drivers[name]; ok {
		return e.version
	}
	return nil
}

// Handler is the plugin manager's handler of "CSIPlugin" sockets
// (pluginmanager.Handler).
type Handler struct{ m *Manager }

// Handler returns the handler to add to the plugin manager for the
// "CSIPlugin" type.
func (m *Manager) Handler() *Handler { return &Handler{m: m} }

// ValidatePlugin takes drivers that speak CSI 1.x, as the kubelet.
func (h *Handler) ValidatePlugin(name, endpoint string, versions []string) error {
	if err := checkPathName("CSI driver name", name); err != nil {
		return fmt.Errorf("CSI driver at %s: %w", endpoint, err)
	}
	if _, err := validateVersions(name, versions, h.m.registeredVersion(name)); err != nil {
		return fmt.Errorf("%w (endpoint %s)", err, endpoint)
	}
	return nil
}

// RegisterPlugin asks the driver what it is (NodeGetInfo,
// NodeGetCapabilities), records it and hands its CSINode entry to the sink.
// Nothing is recorded when any of it fails.
func (h *Handler) RegisterPlugin(ctx context.Context, name, endpoint string, versions []string) error {
	m := h.m
	if err := checkPathName("CSI driver name", name); err != nil {
		return fmt.Errorf("CSI driver at %s: %w", endpoint, err)
	}
	v, err := validateVersions(name, versions, m.registeredVersion(name))
	if err != nil {
		return fmt.Errorf("%w (endpoint %s)", err, endpoint)
	}
	conn, err := m.dial(endpoint)
	if err != nil {
		return fmt.Errorf("CSI driver %q: connecting to %s: %w", name, endpoint, err)
	}
	info, err := describe(ctx, conn, m.registerTimeout, name, endpoint)
	if err != nil {
		conn.Close()
		return err
	}
	info.Version = v.String()
	e := &entry{info: info, version: v, conn: conn}

	// Another socket may have registered the same name meanwhile: the
	// kubelet's rule (higher version wins) is applied again under the lock.
	m.mu.Lock()
	old := m.drivers[name]
	if old != nil && !old.version.LessThan(v) {
		m.mu.Unlock()
		conn.Close()
		return fmt.Errorf("CSI driver %q offering version %s: a driver of that name is already registered with version %s", name, v, old.version)
	}
	m.drivers[name] = e
	m.mu.Unlock()
	if old != nil {
		old.conn.Close()
	}

	if m.sink != nil {
		sctx, cancel := context.WithTimeout(ctx, m.registerTimeout)
		err := m.sink.InstallDriver(sctx, csiNodeDriver(info), maps.Clone(info.Topology))
		cancel()
		if err != nil {
			m.forget(name, e)
			return fmt.Errorf("CSI driver %q: recording it in the CSINode object: %w", name, err)
		}
	}
	m.log.Info("CSI driver registered", "driver", name, "endpoint", endpoint, "version", info.Version, "nodeID", info.NodeID)
	return nil
}

// describe runs NodeGetInfo and NodeGetCapabilities, each within timeout.
// They wait for the driver to be ready, since a driver registers as it
// starts to listen.
func describe(ctx context.Context, conn nodeConn, timeout time.Duration, name, endpoint string) (Driver, error) {
	ictx, cancel := context.WithTimeout(ctx, timeout)
	info, err := conn.NodeGetInfo(ictx, &csipb.NodeGetInfoRequest{}, grpc.WaitForReady(true))
	cancel()
	if err != nil {
		return Driver{}, fmt.Errorf("CSI driver %q at %s: NodeGetInfo: %w", name, endpoint, err)
	}
	if info.GetNodeId() == "" {
		return Driver{}, fmt.Errorf("CSI driver %q at %s: NodeGetInfo answered an empty node_id", name, endpoint)
	}
	if info.GetMaxVolumesPerNode() < 0 {
		return Driver{}, fmt.Errorf("CSI driver %q at %s: NodeGetInfo answered a negative max_volumes_per_node (%d)",
			name, endpoint, info.GetMaxVolumesPerNode())
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	caps, err := conn.NodeGetCapabilities(cctx, &csipb.NodeGetCapabilitiesRequest{}, grpc.WaitForReady(true))
	cancel()
	if err != nil {
		return Driver{}, fmt.Errorf("CSI driver %q at %s: NodeGetCapabilities: %w", name, endpoint, err)
	}
	return Driver{
		Name:         name,
		Endpoint:     endpoint,
		NodeID:       info.GetNodeId(),
		MaxVolumes:   info.GetMaxVolumesPerNode(),
		Topology:     maps.Clone(info.GetAccessibleTopology().GetSegments()),
		Capabilities: capabilitiesFrom(caps.GetCapabilities()),
	}, nil
}

// forget removes e if it is still the registered driver of its name.
func (m *Manager) forget(name string, e *entry) bool {
	m.mu.Lock()
	cur := m.drivers[name]
	if cur == e {
		delete(m.drivers, name)
	}
	m.mu.Unlock()
	if cur == e {
		e.conn.Close()
	}
	return cur == e
}

// DeRegisterPlugin forgets the driver and removes its CSINode entry. Unlike
// the kubelet, which forgets the name whichever socket goes, berth forgets
// it only when the socket that goes is the one registered: a driver that
// another (higher version) registration replaced must not take the new one
// with it.
func (h *Handler) DeRegisterPlugin(ctx context.Context, name, endpoint string) {
	m := h.m
	m.mu.Lock()
	e := m.drivers[name]
	m.mu.Unlock()
	if e == nil || e.info.Endpoint != endpoint || !m.forget(name, e) {
		return
	}
	if m.sink != nil {
		sctx, cancel := context.WithTimeout(ctx, m.registerTimeout)
		err := m.sink.UninstallDriver(sctx, name)
		cancel()
		if err != nil {
			m.log.Error("CSI driver deregistered, but its CSINode entry stays", "driver", name, "err", err)
		}
	}
	m.log.Info("CSI driver deregistered", "driver", name, "endpoint", endpoint)
}
