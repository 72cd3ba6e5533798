package deviceplugin

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Calls is what the plugin has done and been asked, for assertions. The
// requests are copies, in the order they arrived.
type Calls struct {
	Registrations     int   // Register calls the agent accepted
	RegisterFailures  int   // Register calls that failed, refused or unanswered
	LastRegisterError error // the latest failure, nil if none
	ListAndWatch      int   // ListAndWatch streams opened
	Allocate          []*pluginapi.AllocateRequest
	PreStart          []*pluginapi.PreStartContainerRequest
	Preferred         []*pluginapi.PreferredAllocationRequest
}

// AllocatedIDs lists the device IDs of every container request of every
// Allocate call, in order.
func (c Calls) AllocatedIDs() [][]string {
	var ids [][]string
	for _, req := range c.Allocate {
		for _, cr := range req.GetContainerRequests() {
			ids = append(ids, cr.GetDevicesIds())
		}
	}
	return ids
}

func (c Calls) clone() Calls {
	out := c
	out.Allocate = cloneAll(c.Allocate)
	out.PreStart = cloneAll(c.PreStart)
	out.Preferred = cloneAll(c.Preferred)
	return out
}

func cloneAll[M proto.Message](ms []M) []M {
	if ms == nil {
		return nil
	}
	out := make([]M, len(ms))
	for i, m := range ms {
		out[i] = proto.CloneOf(m)
	}
	return out
}

// Calls returns a snapshot of what the plugin has recorded.
func (p *Plugin) Calls() Calls {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls.clone()
}

// Wait blocks until cond holds for the recorded calls or ctx ends. cond runs
// on a snapshot, without the plugin's lock.
func (p *Plugin) Wait(ctx context.Context, cond func(Calls) bool) error {
	for {
		p.mu.Lock()
		c, changed := p.calls.clone(), p.callsChanged
		p.mu.Unlock()
		if cond(c) {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("deviceplugin: waiting for calls (have %d registrations, %d allocations): %w",
				c.Registrations, len(c.Allocate), context.Cause(ctx))
		}
	}
}

// WaitRegistered blocks until the agent has accepted n registrations in all.
func (p *Plugin) WaitRegistered(ctx context.Context, n int) error {
	return p.Wait(ctx, func(c Calls) bool { return c.Registrations >= n })
}

// SetHealth marks a device healthy or not and sends the new list to every
// ListAndWatch stream. Health is kept by ID: it outlives SetDevices.
func (p *Plugin) SetHealth(id string, healthy bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if healthy {
		delete(p.unhealthy, id)
	} else {
		p.unhealthy[id] = true
	}
	p.notifyDevicesLocked()
}

// SetDevices replaces the advertised devices and sends the new list to
// every ListAndWatch stream.
func (p *Plugin) SetDevices(devs []Device) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.devices = cloneDevices(devs)
	p.notifyDevicesLocked()
}

// FailAllocate makes Allocate fail with msg from now on; "" makes it
// succeed again.
func (p *Plugin) FailAllocate(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failAllocate = msg
}

// ShortAllocate makes Allocate answer with one container response fewer
// than it was asked for, a malformed answer the agent must refuse.
func (p *Plugin) ShortAllocate(short bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.shortAllocate = short
}

// deviceList returns the current ListAndWatch answer and a channel closed
// at the next change.
func (p *Plugin) deviceList() (*pluginapi.ListAndWatchResponse, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return deviceList(p.devices, p.unhealthy), p.devicesChanged
}

func (p *Plugin) notifyDevicesLocked() {
	close(p.devicesChanged)
	p.devicesChanged = make(chan struct{})
}

// record applies f to the calls and wakes the waiters.
func (p *Plugin) record(f func(*Calls)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(&p.calls)
	close(p.callsChanged)
	p.callsChanged = make(chan struct{})
}

func (p *Plugin) recordRegistration(err error) {
	p.record(func(c *Calls) {
		if err != nil {
			c.RegisterFailures++
			c.LastRegisterError = err
			return
		}
		c.Registrations++
	})
}
