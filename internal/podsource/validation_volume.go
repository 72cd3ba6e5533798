package podsource

import (
	"path"
	"reflect"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// volumeSources names the sources set in vs as the manifest spells them, in
// declaration order. Reading the struct keeps the list complete as
// k8s.io/api grows new kinds, each of which berth must refuse by name.
func volumeSources(vs *v1.VolumeSource) []string {
	var names []string
	v := reflect.ValueOf(vs).Elem()
	t := v.Type()
	for i := range t.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			names = append(names, name)
		}
	}
	return names
}

// validateVolumes returns the names that mounts may refer to.
func validateVolumes(volumes []v1.Volume, fldPath *field.Path) (map[string]bool, field.ErrorList) {
	var errs field.ErrorList
	names := map[string]bool{}
	for i := range volumes {
		vol := &volumes[i]
		p := fldPath.Index(i)
		switch msgs := validation.IsDNS1123Label(vol.Name); {
		case vol.Name == "":
			errs = append(errs, field.Required(p.Child("name"), ""))
		case len(msgs) > 0:
			for _, msg := range msgs {
				errs = append(errs, field.Invalid(p.Child("name"), vol.Name, msg))
			}
		case names[vol.Name]:
			errs = append(errs, field.Duplicate(p.Child("name"), vol.Name))
		}
		if vol.Name != "" {
			names[vol.Name] = true
		}
		errs = append(errs, validateVolumeSource(&vol.VolumeSource, p)...)
	}
	return names, errs
}

// validateVolumeSource accepts one source, and of those only the ones a
// standalone node can provide itself: emptyDir, hostPath and image.
func validateVolumeSource(vs *v1.VolumeSource, fldPath *field.Path) field.ErrorList {
	sources := volumeSources(vs)
	if len(sources) == 0 {
		return field.ErrorList{field.Required(fldPath, "must specify a volume type")}
	}
	var errs field.ErrorList
	for i, name := range sources {
		p := fldPath.Child(name)
		if i > 0 {
			errs = append(errs, field.Forbidden(p, "may not specify more than 1 volume type"))
			continue
		}
		switch name {
		case "emptyDir":
			errs = append(errs, validateEmptyDir(vs.EmptyDir, p)...)
		case "hostPath":
			errs = append(errs, validateHostPath(vs.HostPath, p)...)
		case "image":
			errs = append(errs, validateImageVolume(vs.Image, p)...)
		case "configMap", "secret", "projected", "persistentVolumeClaim", "ephemeral":
			errs = append(errs, needsAPIServer(p))
		default:
			errs = append(errs, field.Forbidden(p, "is not supported by berth; only emptyDir, hostPath and image volumes are"))
		}
	}
	return errs
}

// validateImageVolume is the API server's validateImageVolumeSource: the
// reference is required and the pull policy one of the three. Whether the
// runtime can mount it is decided at admission (lifecycle).
func validateImageVolume(img *v1.ImageVolumeSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch ref := fldPath.Child("reference"); {
	case img.Reference == "":
		errs = append(errs, field.Required(ref, ""))
	case strings.TrimSpace(img.Reference) != img.Reference:
		errs = append(errs, field.Invalid(ref, img.Reference, "must not have leading or trailing whitespace"))
	}
	return append(errs, oneOfEnum(img.PullPolicy, fldPath.Child("pullPolicy"),
		v1.PullAlways, v1.PullIfNotPresent, v1.PullNever)...)
}

func validateEmptyDir(e *v1.EmptyDirVolumeSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if e.SizeLimit != nil && e.SizeLimit.Sign() < 0 {
		errs = append(errs, field.Forbidden(fldPath.Child("sizeLimit"), "SizeLimit field must be a valid resource quantity"))
	}
	m := e.Medium
	if m != v1.StorageMediumDefault && m != v1.StorageMediumMemory && m != v1.StorageMediumHugePages &&
		!strings.HasPrefix(string(m), string(v1.StorageMediumHugePagesPrefix)) {
		errs = append(errs, field.NotSupported(fldPath.Child("medium"), m, []v1.StorageMedium{
			v1.StorageMediumDefault, v1.StorageMediumMemory, v1.StorageMediumHugePages, v1.StorageMediumHugePagesPrefix + "<size>"}))
	}
	return errs
}

func validateHostPath(h *v1.HostPathVolumeSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	p := fldPath.Child("path")
	switch {
	case h.Path == "":
		errs = append(errs, field.Required(p, ""))
	case !path.IsAbs(h.Path):
		errs = append(errs, field.Invalid(p, h.Path, "must be an absolute path"))
	default:
		errs = append(errs, validatePathNoBacksteps(h.Path, p)...)
	}
	if h.Type != nil {
		errs = append(errs, oneOfEnumOrEmpty(*h.Type, fldPath.Child("type"),
			v1.HostPathUnset, v1.HostPathDirectoryOrCreate, v1.HostPathDirectory, v1.HostPathFileOrCreate,
			v1.HostPathFile, v1.HostPathSocket, v1.HostPathCharDev, v1.HostPathBlockDev)...)
	}
	return errs
}

// oneOfEnumOrEmpty checks an enum whose empty value is one of the valid ones.
func oneOfEnumOrEmpty[T ~string](value T, fldPath *field.Path, valid ...T) field.ErrorList {
	for _, v := range valid {
		if value == v {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(fldPath, value, valid)}
}

func validateVolumeMounts(mounts []v1.VolumeMount, volumes map[string]bool, privileged bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	mountPaths := map[string]bool{}
	for i, m := range mounts {
		p := fldPath.Index(i)
		switch {
		case m.Name == "":
			errs = append(errs, field.Required(p.Child("name"), ""))
		case !volumes[m.Name]:
			errs = append(errs, field.NotFound(p.Child("name"), m.Name))
		}
		mp := p.Child("mountPath")
		switch {
		case m.MountPath == "":
			errs = append(errs, field.Required(mp, ""))
		case !path.IsAbs(m.MountPath):
			errs = append(errs, field.Invalid(mp, m.MountPath, "must be an absolute path"))
		case mountPaths[path.Clean(m.MountPath)]:
			errs = append(errs, field.Invalid(mp, m.MountPath, "must be unique"))
		}
		mountPaths[path.Clean(m.MountPath)] = true
		if m.SubPath != "" {
			errs = append(errs, validateLocalDescendingPath(m.SubPath, p.Child("subPath"))...)
		}
		if m.SubPathExpr != "" {
			if m.SubPath != "" {
				errs = append(errs, field.Invalid(p.Child("subPathExpr"), m.SubPathExpr, "subPathExpr and subPath are mutually exclusive"))
			}
			errs = append(errs, validateLocalDescendingPath(m.SubPathExpr, p.Child("subPathExpr"))...)
		}
		if mode := m.MountPropagation; mode != nil {
			errs = append(errs, oneOfEnum(*mode, p.Child("mountPropagation"),
				v1.MountPropagationNone, v1.MountPropagationHostToContainer, v1.MountPropagationBidirectional)...)
			if *mode == v1.MountPropagationBidirectional && !privileged {
				errs = append(errs, field.Forbidden(p.Child("mountPropagation"), "Bidirectional mount propagation is available only to privileged containers"))
			}
		}
		if rro := m.RecursiveReadOnly; rro != nil {
			errs = append(errs, oneOfEnum(*rro, p.Child("recursiveReadOnly"),
				v1.RecursiveReadOnlyDisabled, v1.RecursiveReadOnlyIfPossible, v1.RecursiveReadOnlyEnabled)...)
			if *rro != v1.RecursiveReadOnlyDisabled && !m.ReadOnly {
				errs = append(errs, field.Forbidden(p.Child("recursiveReadOnly"), "may only be specified when readOnly is true"))
			}
		}
	}
	return errs
}

// validateLocalDescendingPath keeps a sub path inside its volume.
func validateLocalDescendingPath(target string, fldPath *field.Path) field.ErrorList {
	if path.IsAbs(target) {
		return field.ErrorList{field.Invalid(fldPath, target, "must be a relative path")}
	}
	return validatePathNoBacksteps(target, fldPath)
}

func validatePathNoBacksteps(target string, fldPath *field.Path) field.ErrorList {
	for _, part := range strings.Split(target, "/") {
		if part == ".." {
			return field.ErrorList{field.Invalid(fldPath, target, "must not contain '..'")}
		}
	}
	return nil
}
