package checkpoint

import (
	"github.com/berth-dev/berth/internal/devicemanager/checkpoint/internal/checksum"
	v1 "github.com/berth-dev/berth/internal/devicemanager/checkpoint/internal/v1"
)

// The printers below write by hand the text go-spew prints for the hashed
// values (see package checksum for its rules). The type and field names in
// their literals are the kubelet's, which the checksum covers. The tests hold
// them to go-spew's text of the Go types, so a renamed type or a field added
// to a hashed type fails them until the two agree again.

// sum is the checksum the kubelet stores for d.
func (d checkpointData) sum() uint64 { return checksum.Sum(d.print) }

func (d checkpointData) print(p *checksum.Printer) {
	p.WriteString("(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)")
	if d.PodDeviceEntries == nil {
		p.WriteString("<nil>")
	} else {
		p.WriteString("[")
		for i := range d.PodDeviceEntries {
			e := &d.PodDeviceEntries[i]
			if i > 0 {
				p.WriteString(" ")
			}
			printEntryNames(p, e.PodUID, e.ContainerName, e.ResourceName)
			p.WriteString(" DeviceIDs:(checkpoint.DevicesPerNUMA)")
			p.Int64Strings(e.DeviceIDs)
			printAllocResp(p, e.AllocResp)
		}
		p.WriteString("]")
	}
	printRegistered(p, d.RegisteredDevices)
}

// sumV1 is the checksum the kubelet v1.11 to v1.19 stored for d.Data.
func sumV1(d *v1.Data) uint64 {
	return checksum.Sum(func(p *checksum.Printer) { printV1(p, d) })
}

// printV1 differs from checkpointData.print only in DeviceIDs, a plain list.
func printV1(p *checksum.Printer, d *v1.Data) {
	entries := d.Data.PodDeviceEntries
	p.WriteString("(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)")
	if entries == nil {
		p.WriteString("<nil>")
	} else {
		p.WriteString("[")
		for i := range entries {
			e := &entries[i]
			if i > 0 {
				p.WriteString(" ")
			}
			printEntryNames(p, e.PodUID, e.ContainerName, e.ResourceName)
			p.WriteString(" DeviceIDs:([]string)")
			p.Strings(e.DeviceIDs)
			printAllocResp(p, e.AllocResp)
		}
		p.WriteString("]")
	}
	printRegistered(p, d.Data.RegisteredDevices)
}

// printEntryNames opens a PodDevicesEntry, which as a slice element carries
// no type of its own.
func printEntryNames(p *checksum.Printer, podUID, containerName, resourceName string) {
	p.WriteString("{PodUID:(string)")
	p.WriteString(podUID)
	p.WriteString(" ContainerName:(string)")
	p.WriteString(containerName)
	p.WriteString(" ResourceName:(string)")
	p.WriteString(resourceName)
}

// printAllocResp closes a PodDevicesEntry.
func printAllocResp(p *checksum.Printer, resp []byte) {
	p.WriteString(" AllocResp:([]uint8)")
	p.Bytes(resp)
	p.WriteString("}")
}

// printRegistered closes a checkpointData.
func printRegistered(p *checksum.Printer, registered map[string][]string) {
	p.WriteString(" RegisteredDevices:(map[string][]string)")
	p.StringStrings(registered)
	p.WriteString("}")
}
