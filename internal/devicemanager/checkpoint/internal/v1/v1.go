// Package checkpoint (imported as v1) holds the device manager checkpoint
// types of kubelet v1.11 to v1.19, whose DeviceIDs is a plain list with no
// NUMA affinity (seed 000 describes the v1.13 form).
//
// Its package name is checkpoint, not v1, on purpose: the stored checksum
// hashes go-spew's text of the value, which names the types as
// "checkpoint.checkpointData" and "checkpoint.PodDevicesEntry". The current
// format uses those same names in the parent package, so the old shape needs a
// second package called checkpoint to be hashed as the old kubelet hashed it.
// (The kubelet itself declares PodDevicesEntryV1 and rewrites the type names
// in the printed text with strings.Replace, which would also rewrite those
// words inside pod UIDs or device IDs; separate types hash the real text.)
package checkpoint

// PodDevicesEntry is one container's devices of one resource.
type PodDevicesEntry struct {
	PodUID        string
	ContainerName string
	ResourceName  string
	DeviceIDs     []string
	AllocResp     []byte
}

// checkpointData is the checksummed part of the file.
type checkpointData struct {
	PodDeviceEntries  []PodDevicesEntry
	RegisteredDevices map[string][]string
}

// Data is the whole file: json.Unmarshal into it, then checksum Data.
type Data struct {
	Data     checkpointData
	Checksum uint64
}
