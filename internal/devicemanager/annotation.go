package devicemanager

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/v1helper"
)

// AnnotationDevices is the CRI container annotation in which berth records
// the devices a container was created with, so that the runtime is a second
// source of truth when the checkpoint is lost. Its value is a JSON object,
// resource name → device IDs in order, e.g.
// {"example.com/widget":["w0","w1"]}.
//
// An annotation rather than a label: the runtime keeps annotations as
// opaque data and returns them from ListContainers, as it does the
// kubelet's own per-container facts (hash, restart count); labels are for
// selection, and a label value could not hold a list of arbitrary IDs.
// The kubelet records nothing of the kind: it trusts its checkpoint alone.
const AnnotationDevices = "berth.dev/devices"

// maxDevicesAnnotation bounds the value berth reads back: a value it wrote
// itself is a few hundred bytes.
const maxDevicesAnnotation = 64 << 10

// AnnotationValue returns the value of AnnotationDevices for the container,
// or "" when it holds no device.
func (o *DeviceRunContainerOptions) AnnotationValue() string {
	if o == nil || len(o.DeviceIDs) == 0 {
		return ""
	}
	// A map of string slices always marshals, with its keys in order.
	b, _ := json.Marshal(o.DeviceIDs)
	return string(b)
}

// parseDevicesAnnotation reads a value of AnnotationDevices back: each
// resource an extended resource name, each with distinct, non-empty device
// IDs. The IDs come back sorted.
func parseDevicesAnnotation(value string) (map[string][]string, error) {
	if len(value) > maxDevicesAnnotation {
		return nil, fmt.Errorf("%d bytes, more than the %d berth reads", len(value), maxDevicesAnnotation)
	}
	var out map[string][]string
	if err := json.Unmarshal([]byte(value), &out); err != nil {
		return nil, fmt.Errorf("not a JSON object of resource names to device IDs: %w", err)
	}
	if len(out) == 0 {
		return nil, errors.New("no resource")
	}
	for _, resource := range sortedKeys(out) {
		if !v1helper.IsExtendedResourceName(v1.ResourceName(resource)) {
			return nil, fmt.Errorf("resource %q is not an extended resource name", resource)
		}
		ids := slices.Clone(out[resource])
		if len(ids) == 0 {
			return nil, fmt.Errorf("resource %s: no device ID", resource)
		}
		slices.Sort(ids)
		for i, id := range ids {
			if id == "" {
				return nil, fmt.Errorf("resource %s: an empty device ID", resource)
			}
			if i > 0 && ids[i-1] == id {
				return nil, fmt.Errorf("resource %s: device %q listed twice", resource, id)
			}
		}
		out[resource] = ids
	}
	return out, nil
}
