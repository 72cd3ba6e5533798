// Package checkpoint reads and writes the device manager's checkpoint,
// kubelet_internal_checkpoint, byte for byte as the kubelet does, so that
// berth and the kubelet can take over each other's node.
//
// The file is json.Marshal of {"Data": ..., "Checksum": N}, where N is the
// FNV-32a of go-spew's text of Data (see internal/checksum), which hashtext.go
// prints by hand. That text carries the Go type names; the types below keep
// the kubelet's names, and this package is called checkpoint, so that the
// tests can hold the hand-printed text to go-spew's.
package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	v1 "github.com/berth-dev/berth/internal/devicemanager/checkpoint/internal/v1"
)

// ErrCorrupt is wrapped by every error Decode returns: the bytes are not a
// checkpoint that any kubelet format accepts.
var ErrCorrupt = errors.New("corrupt device manager checkpoint")

// DevicesPerNUMA maps a NUMA node to the device IDs affine to it; node -1
// holds devices the plugin reported without topology.
type DevicesPerNUMA map[int64][]string

// PodDevicesEntry is one container's devices of one resource, with the
// device plugin's AllocateResponse for it (ContainerAllocateResponse protobuf).
type PodDevicesEntry struct {
	PodUID        string
	ContainerName string
	ResourceName  string
	DeviceIDs     DevicesPerNUMA
	AllocResp     []byte
}

// checkpointData is the checksummed part of the file.
type checkpointData struct {
	PodDeviceEntries  []PodDevicesEntry
	RegisteredDevices map[string][]string
}

// data is the whole file, the kubelet's checkpoint.Data.
type data struct {
	Data     checkpointData
	Checksum uint64
}

// Format is the checkpoint format a file was read in.
type Format int

const (
	// FormatV2 is the current format, kubelet v1.20 and later.
	FormatV2 Format = iota + 1
	// FormatV1 is the format of kubelet v1.11 to v1.19 (the v1.13 form of
	// seed 000), without NUMA affinity; Decode converts it.
	FormatV1
)

func (f Format) String() string {
	switch f {
	case FormatV2:
		return "v2"
	case FormatV1:
		return "v1"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// Encode returns the bytes the kubelet writes for these entries and
// registered devices (resource name to healthy device IDs). Pass nil entries
// when there are none, as the kubelet does: nil and empty hash differently.
// A nil registered map is written as {}, as the kubelet's always-made map is.
func Encode(entries []PodDevicesEntry, registered map[string][]string) ([]byte, error) {
	// JSON replaces invalid UTF-8 with U+FFFD, so such a string would be read
	// back different from what was hashed: the file would never verify.
	if err := checkUTF8(entries, registered); err != nil {
		return nil, fmt.Errorf("encode device manager checkpoint: %w", err)
	}
	if registered == nil {
		registered = map[string][]string{}
	}
	d := checkpointData{PodDeviceEntries: entries, RegisteredDevices: registered}
	b, err := json.Marshal(data{Data: d, Checksum: d.sum()})
	if err != nil {
		return nil, fmt.Errorf("encode device manager checkpoint: %w", err)
	}
	return b, nil
}

// Decode reads a checkpoint in the current format or, failing that, the v1
// format, whose device lists it converts to DevicesPerNUMA{-1: ids}: the old
// kubelet recorded no affinity. (The kubelet converts them to node 0; -1 is
// this package's "no topology", which claims no affinity that was never
// observed.) The returned registered map is never nil. Every error wraps
// ErrCorrupt and says why.
func Decode(b []byte) (entries []PodDevicesEntry, registered map[string][]string, format Format, err error) {
	cur, errV2 := readV2(b)
	if errV2 == nil && cur.stored == cur.computed {
		return cur.result()
	}
	old, errV1 := readV1(b)
	if errV1 == nil && old.stored == old.computed {
		return old.result()
	}
	// A file that parses as v2 is read as v2 by every current kubelet, so
	// its mismatch is the one worth reporting.
	switch {
	case errV2 == nil:
		return nil, nil, 0, cur.mismatch()
	case errV1 == nil:
		return nil, nil, 0, old.mismatch()
	}
	return nil, nil, 0, fmt.Errorf("%w: not in any known format: %w; %w", ErrCorrupt, errV2, errV1)
}

// reading is one format's view of a file.
type reading struct {
	format           Format
	entries          []PodDevicesEntry
	registered       map[string][]string
	stored, computed uint64
}

func (r reading) result() ([]PodDevicesEntry, map[string][]string, Format, error) {
	if r.registered == nil {
		r.registered = map[string][]string{}
	}
	return r.entries, r.registered, r.format, nil
}

func (r reading) mismatch() error {
	return fmt.Errorf("%w: checksum mismatch: stored %d, computed %d (%s format)",
		ErrCorrupt, r.stored, r.computed, r.format)
}

func readV2(b []byte) (reading, error) {
	var d data
	if err := json.Unmarshal(b, &d); err != nil {
		return reading{}, fmt.Errorf("%s format: %w", FormatV2, err)
	}
	return reading{
		format:     FormatV2,
		entries:    d.Data.PodDeviceEntries,
		registered: d.Data.RegisteredDevices,
		stored:     d.Checksum,
		computed:   d.Data.sum(),
	}, nil
}

func readV1(b []byte) (reading, error) {
	var d v1.Data
	if err := json.Unmarshal(b, &d); err != nil {
		return reading{}, fmt.Errorf("%s format: %w", FormatV1, err)
	}
	var entries []PodDevicesEntry
	if d.Data.PodDeviceEntries != nil {
		entries = make([]PodDevicesEntry, 0, len(d.Data.PodDeviceEntries))
	}
	for _, e := range d.Data.PodDeviceEntries {
		entries = append(entries, PodDevicesEntry{
			PodUID:        e.PodUID,
			ContainerName: e.ContainerName,
			ResourceName:  e.ResourceName,
			DeviceIDs:     DevicesPerNUMA{-1: e.DeviceIDs},
			AllocResp:     e.AllocResp,
		})
	}
	return reading{
		format:     FormatV1,
		entries:    entries,
		registered: d.Data.RegisteredDevices,
		stored:     d.Checksum,
		computed:   sumV1(&d),
	}, nil
}

func checkUTF8(entries []PodDevicesEntry, registered map[string][]string) error {
	bad := func(field, s string) error {
		return fmt.Errorf("%s %q is not valid UTF-8", field, s)
	}
	for i, e := range entries {
		for _, f := range [...]struct{ name, s string }{
			{"PodUID", e.PodUID}, {"ContainerName", e.ContainerName}, {"ResourceName", e.ResourceName},
		} {
			if !utf8.ValidString(f.s) {
				return bad(fmt.Sprintf("PodDeviceEntries[%d].%s", i, f.name), f.s)
			}
		}
		for node, ids := range e.DeviceIDs {
			for j, id := range ids {
				if !utf8.ValidString(id) {
					return bad(fmt.Sprintf("PodDeviceEntries[%d].DeviceIDs[%d][%d]", i, node, j), id)
				}
			}
		}
	}
	for resource, ids := range registered {
		if !utf8.ValidString(resource) {
			return bad("RegisteredDevices key", resource)
		}
		for j, id := range ids {
			if !utf8.ValidString(id) {
				return bad(fmt.Sprintf("RegisteredDevices[%q][%d]", resource, j), id)
			}
		}
	}
	return nil
}
