package csi

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	storagev1 "k8s.io/api/storage/v1"
)

// The keys of the kubelet's vol_data.json.
const (
	keySpecVolID           = "specVolID"
	keyVolumeHandle        = "volumeHandle"
	keyDriverName          = "driverName"
	keyNodeName            = "nodeName"
	keyAttachmentID        = "attachmentID"
	keyVolumeLifecycleMode = "volumeLifecycleMode"
	keySELinuxMountContext = "seLinuxMountContext"
)

// VolData is a vol_data.json: what the kubelet (and berth) remembers of a
// staged or published volume so that it can be torn down after a restart.
// A staging dir's file has only the driver and the handle (and the SELinux
// context, where one was used).
type VolData struct {
	SpecVolID           string
	VolumeHandle        string
	DriverName          string
	NodeName            string
	AttachmentID        string
	LifecycleMode       storagev1.VolumeLifecycleMode
	SELinuxMountContext string
}

// encode writes d as the kubelet does: a flat JSON object of strings, empty
// fields left out.
func (d VolData) encode() ([]byte, error) {
	m := map[string]string{}
	for k, v := range map[string]string{
		keySpecVolID:           d.SpecVolID,
		keyVolumeHandle:        d.VolumeHandle,
		keyDriverName:          d.DriverName,
		keyNodeName:            d.NodeName,
		keyAttachmentID:        d.AttachmentID,
		keyVolumeLifecycleMode: string(d.LifecycleMode),
		keySELinuxMountContext: d.SELinuxMountContext,
	} {
		if v != "" {
			m[k] = v
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// decodeVolData reads a vol_data.json; path only names it in errors. The
// driver and the handle are required: without them nothing can be torn
// down. Unknown keys are kept out of VolData but are no error, since a
// newer kubelet may have written them.
func decodeVolData(path string, b []byte) (VolData, error) {
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return VolData{}, fmt.Errorf("volume data file %s: not a JSON object of strings: %w", path, err)
	}
	d := VolData{
		SpecVolID:           m[keySpecVolID],
		VolumeHandle:        m[keyVolumeHandle],
		DriverName:          m[keyDriverName],
		NodeName:            m[keyNodeName],
		AttachmentID:        m[keyAttachmentID],
		LifecycleMode:       storagev1.VolumeLifecycleMode(m[keyVolumeLifecycleMode]),
		SELinuxMountContext: m[keySELinuxMountContext],
	}
	var missing []string
	if d.DriverName == "" {
		missing = append(missing, keyDriverName)
	}
	if d.VolumeHandle == "" {
		missing = append(missing, keyVolumeHandle)
	}
	if len(missing) > 0 {
		return VolData{}, fmt.Errorf("volume data file %s: missing or empty %s (has keys: %s)",
			path, strings.Join(missing, ", "), strings.Join(slices.Sorted(maps.Keys(m)), ", "))
	}
	switch d.LifecycleMode {
	case "", storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral:
	default:
		return VolData{}, fmt.Errorf("volume data file %s: %s %q is neither %s nor %s", path,
			keyVolumeLifecycleMode, d.LifecycleMode, storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral)
	}
	return d, nil
}
