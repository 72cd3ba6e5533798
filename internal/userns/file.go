package userns

import (
	"encoding/json"
	"errors"
)

// MappingsFile is the name of a pod's mappings file in its directory, the
// kubelet's ("userns").
const MappingsFile = "userns"

// The kubelet's file format, so that a pod directory reads the same to
// either: one identical uid and gid mapping from container ID 0.
type fileIDMapping struct {
	HostID      uint32 `json:"hostId"`
	ContainerID uint32 `json:"containerId"`
	Length      uint32 `json:"length"`
}

type fileUserNamespace struct {
	UIDMappings []fileIDMapping `json:"uidMappings"`
	GIDMappings []fileIDMapping `json:"gidMappings"`
}

// encode is m as a mappings file.
func encode(m Mapping) []byte {
	one := []fileIDMapping{{HostID: m.HostID, ContainerID: 0, Length: m.Length}}
	data, _ := json.Marshal(fileUserNamespace{UIDMappings: one, GIDMappings: one}) // plain structs never fail
	return data
}

// decode reads a mappings file, refusing any that berth or the kubelet
// would not have written (parseUserNsFileAndRecord's checks).
func decode(data []byte) (Mapping, error) {
	var f fileUserNamespace
	if err := json.Unmarshal(data, &f); err != nil {
		return Mapping{}, err
	}
	switch {
	case len(f.UIDMappings) != 1:
		return Mapping{}, errors.New("uidMappings: exactly one mapping is allowed")
	case len(f.GIDMappings) != 1 || f.GIDMappings[0] != f.UIDMappings[0]:
		return Mapping{}, errors.New("gidMappings: must be the same one mapping as uidMappings")
	case f.UIDMappings[0].ContainerID != 0:
		return Mapping{}, errors.New("uidMappings[0].containerId: must be 0 (root is always mapped)")
	case f.UIDMappings[0].Length == 0:
		return Mapping{}, errors.New("uidMappings[0].length: must not be 0")
	}
	return Mapping{HostID: f.UIDMappings[0].HostID, Length: f.UIDMappings[0].Length}, nil
}
