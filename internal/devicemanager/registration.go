package devicemanager

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/berth-dev/berth/internal/v1helper"
)

// registration serves the plugins' Registration service.
type registration struct {
	pluginapi.UnimplementedRegistrationServer
	m *Manager
}

func (r registration) Register(ctx context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	if err := r.m.register(ctx, req); err != nil {
		return nil, err
	}
	return &pluginapi.Empty{}, nil
}

// validateRegistration checks a request before berth dials anything.
func validateRegistration(req *pluginapi.RegisterRequest) error {
	if req.Version != pluginapi.Version {
		return fmt.Errorf("version %q is not supported: berth speaks device plugin API %s", req.Version, pluginapi.Version)
	}
	if !v1helper.IsExtendedResourceName(v1.ResourceName(req.ResourceName)) {
		return fmt.Errorf("resource name %q is not an extended resource name (like example.com/widget, outside kubernetes.io)", req.ResourceName)
	}
	ep := req.Endpoint
	if ep == "" || ep == "." || ep == ".." || strings.ContainsRune(ep, filepath.Separator) || ep == KubeletSocket {
		return fmt.Errorf("endpoint %q is not the name of a socket in the device plugin directory", ep)
	}
	return nil
}

// register connects to a plugin that asked to register, replacing the
// resource's previous plugin, and starts following its device list.
func (m *Manager) register(ctx context.Context, req *pluginapi.RegisterRequest) error {
	log := m.log.With("resource", req.ResourceName, "endpoint", req.Endpoint)
	if err := validateRegistration(req); err != nil {
		log.Warn("refused a device plugin registration", "err", err)
		m.nodeEvent(v1.EventTypeWarning, ReasonPluginRefused, fmt.Sprintf("Device plugin for %q refused: %v", req.ResourceName, err))
		return err
	}
	m.mu.Lock()
	parent, closed := m.ctx, m.closed
	m.mu.Unlock()
	if closed || parent == nil {
		return fmt.Errorf("berth is stopping")
	}
	ep, err := connect(ctx, parent, req.ResourceName, filepath.Join(m.dir, req.Endpoint))
	if err != nil {
		log.Warn("device plugin registered but does not answer", "err", err)
		m.nodeEvent(v1.EventTypeWarning, ReasonPluginRefused, fmt.Sprintf("Device plugin for %q does not answer: %v", req.ResourceName, err))
		return err
	}

	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		ep.stop()
		return fmt.Errorf("berth is stopping")
	}
	r := m.resources[req.ResourceName]
	if r == nil {
		r = &pluginResource{devices: map[string]*pluginapi.Device{}}
		m.resources[req.ResourceName] = r
	}
	old := r.ep
	r.ep, r.invalid, r.listed = ep, "", false
	m.wg.Go(func() { m.listAndWatch(ep) })
	m.mu.Unlock()
	if old != nil {
		old.stop()
	}
	log.Info("device plugin registered", "preStartRequired", ep.opts.GetPreStartRequired(),
		"preferredAllocation", ep.opts.GetGetPreferredAllocationAvailable())
	m.nodeEvent(v1.EventTypeNormal, ReasonPluginRegistered, fmt.Sprintf("Device plugin for %q registered at %s", req.ResourceName, ep.socket))
	return nil
}

// listAndWatch follows a plugin's device list until the stream breaks or
// the endpoint is replaced.
func (m *Manager) listAndWatch(ep *endpoint) {
	defer ep.stop()
	stream, err := ep.client.ListAndWatch(ep.ctx, &pluginapi.Empty{})
	for err == nil {
		var resp *pluginapi.ListAndWatchResponse
		if resp, err = stream.Recv(); err == nil {
			m.updateDevices(ep, resp.Devices)
		}
	}
	m.disconnected(ep, err)
}

// validateDevices checks a plugin's device list.
func validateDevices(devs []*pluginapi.Device) error {
	seen := map[string]bool{}
	for i, d := range devs {
		switch {
		case d == nil:
			return fmt.Errorf("device %d is empty", i)
		case d.ID == "":
			return fmt.Errorf("device %d has no ID", i)
		case seen[d.ID]:
			return fmt.Errorf("device ID %q is listed twice", d.ID)
		case d.Health != pluginapi.Healthy && d.Health != pluginapi.Unhealthy:
			return fmt.Errorf("device %q has health %q, want %s or %s", d.ID, d.Health, pluginapi.Healthy, pluginapi.Unhealthy)
		}
		seen[d.ID] = true
	}
	return nil
}

// updateDevices takes a new device list from ep's plugin.
func (m *Manager) updateDevices(ep *endpoint, devs []*pluginapi.Device) {
	m.mu.Lock()
	r := m.resources[ep.resource]
	if r == nil || r.ep != ep {
		m.mu.Unlock()
		return // replaced meanwhile
	}
	err := validateDevices(devs)
	newlyInvalid := err != nil && r.invalid == ""
	r.listed = true
	before := r.healthy().Len()
	if err != nil {
		r.invalid = err.Error()
	} else {
		r.invalid = ""
		r.devices = make(map[string]*pluginapi.Device, len(devs))
		for _, d := range devs {
			r.devices[d.ID] = d
		}
	}
	after := r.healthy().Len()
	snap := m.snapshotLocked()
	m.mu.Unlock()

	switch {
	case newlyInvalid:
		m.log.Warn("device plugin sent an invalid device list; its devices are unhealthy until it sends a valid one",
			"resource", ep.resource, "err", err)
		m.nodeEvent(v1.EventTypeWarning, ReasonInvalidDeviceList,
			fmt.Sprintf("Device plugin for %q sent an invalid device list: %v", ep.resource, err))
	case err == nil && (after != before || len(devs) != before):
		m.log.Info("device list updated", "resource", ep.resource, "devices", len(devs), "healthy", after)
	}
	if err := m.writeCheckpoint(snap); err != nil {
		m.log.Error("writing the device checkpoint", "err", err)
	}
}

// disconnected marks ep's devices unhealthy once its stream broke, unless
// another registration replaced it or berth is stopping.
func (m *Manager) disconnected(ep *endpoint, err error) {
	m.mu.Lock()
	r := m.resources[ep.resource]
	if r == nil || r.ep != ep || m.closed {
		m.mu.Unlock()
		return
	}
	r.ep = nil
	r.disconnectedAt = m.clk.Now()
	snap := m.snapshotLocked()
	m.mu.Unlock()

	m.log.Warn("device plugin went away; its devices are unhealthy until it registers again",
		"resource", ep.resource, "forgottenAfter", endpointGracePeriod.String(), "err", err)
	m.nodeEvent(v1.EventTypeWarning, ReasonPluginDisconnected,
		fmt.Sprintf("Device plugin for %q went away (%v); its devices are unhealthy until it registers again", ep.resource, err))
	if err := m.writeCheckpoint(snap); err != nil {
		m.log.Error("writing the device checkpoint", "err", err)
	}
}
