package volume

import (
	"errors"
	"fmt"
	"path/filepath"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/fieldpath"
)

// The projections below are the kubelet's MakePayload and CollectData
// (pkg/volume/configmap, secret, downwardapi): which file each key or field
// becomes, with which mode. They are pure: the objects are read by the
// caller.

// configMapPayload projects a configMap's data and binaryData: every key as
// a file of its name, or with items only the keys listed, at their paths.
// A listed key the map lacks is an error unless optional.
func configMapPayload(items []v1.KeyToPath, cm *v1.ConfigMap, defaultMode int32, optional bool) (map[string]FileProjection, error) {
	payload := make(map[string]FileProjection, len(cm.Data)+len(cm.BinaryData))
	if len(items) == 0 {
		for k, v := range cm.Data {
			payload[k] = FileProjection{Data: []byte(v), Mode: defaultMode}
		}
		for k, v := range cm.BinaryData {
			payload[k] = FileProjection{Data: v, Mode: defaultMode}
		}
		return payload, nil
	}
	for _, ktp := range items {
		var data []byte
		if s, ok := cm.Data[ktp.Key]; ok {
			data = []byte(s)
		} else if b, ok := cm.BinaryData[ktp.Key]; ok {
			data = b
		} else if optional {
			continue
		} else {
			return nil, fmt.Errorf("configmap references non-existent config key: %s", ktp.Key)
		}
		payload[ktp.Path] = FileProjection{Data: data, Mode: itemMode(ktp.Mode, defaultMode)}
	}
	return payload, nil
}

// secretPayload is configMapPayload for a secret's data.
func secretPayload(items []v1.KeyToPath, s *v1.Secret, defaultMode int32, optional bool) (map[string]FileProjection, error) {
	payload := make(map[string]FileProjection, len(s.Data))
	if len(items) == 0 {
		for k, v := range s.Data {
			payload[k] = FileProjection{Data: v, Mode: defaultMode}
		}
		return payload, nil
	}
	for _, ktp := range items {
		data, ok := s.Data[ktp.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, fmt.Errorf("references non-existent secret key: %s", ktp.Key)
		}
		payload[ktp.Path] = FileProjection{Data: data, Mode: itemMode(ktp.Mode, defaultMode)}
	}
	return payload, nil
}

// downwardAPIPayload projects the pod's own fields (metadata only) and its
// containers' resources, one file per item. Every item is tried; the
// errors are returned together.
func downwardAPIPayload(items []v1.DownwardAPIVolumeFile, pod *v1.Pod, defaultMode int32, allocatable v1.ResourceList) (map[string]FileProjection, error) {
	payload := make(map[string]FileProjection, len(items))
	var errs []error
	for _, item := range items {
		var val string
		var err error
		switch {
		case item.FieldRef != nil:
			val, err = fieldpath.ExtractFieldPathAsString(pod, item.FieldRef.FieldPath)
		case item.ResourceFieldRef != nil:
			val, err = fieldpath.ExtractResourceValue(pod, nil, item.ResourceFieldRef, allocatable)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", item.Path, err))
			continue
		}
		payload[filepath.Clean(item.Path)] = FileProjection{Data: []byte(val), Mode: itemMode(item.Mode, defaultMode)}
	}
	return payload, errors.Join(errs...)
}

func itemMode(mode *int32, defaultMode int32) int32 {
	if mode != nil {
		return *mode
	}
	return defaultMode
}

// modeOr is the volume's defaultMode, or def (0644) for a pod the API
// server did not default.
func modeOr(mode *int32, def int32) int32 {
	if mode != nil {
		return *mode
	}
	return def
}
