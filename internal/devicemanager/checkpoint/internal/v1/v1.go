// Package checkpoint (imported as v1) holds the device manager checkpoint
// types of kubelet v1.11 to v1.19, whose DeviceIDs is a plain list with no
// NUMA affinity (seed 000 describes the v1.13 form).
//
// Its package name is checkpoint, not v1, on purpose: the stored checksum
// hashes go-spew's text of the value, which names the types as
// "checkpoint.checkpointData" and "checkpoint.PodDevicesEntry". The parent
// package prints that text by hand (printV1), and its tests hold it to
// go-spew's text of these types, which is only the old kubelet's text if they
// too live in a package called checkpoint. (The kubelet itself declares
// PodDevicesEntryV1 and rewrites the type names in the printed text with
// strings.Replace, which would also rewrite those words inside pod UIDs or
// device IDs; separate types give the real text.)
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
