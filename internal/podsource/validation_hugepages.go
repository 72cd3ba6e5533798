package podsource

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/berth-dev/berth/internal/v1helper"
)

// validateHugePageVolumes refuses a huge page emptyDir that could never be
// mounted: one whose medium names no page size the pod requests, or an
// unsized HugePages medium in a pod requesting several sizes or none. The
// kubelet finds these only when it mounts the volume, and then retries for
// ever; berth says so at once, with the kubelet's reason.
func validateHugePageVolumes(spec *v1.PodSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range spec.Volumes {
		ed := spec.Volumes[i].EmptyDir
		if ed == nil || !v1helper.IsHugePageMedium(ed.Medium) {
			continue
		}
		if _, err := v1helper.HugePagesPageSize(spec, ed.Medium); err != nil {
			errs = append(errs, field.Invalid(fldPath.Index(i).Child("emptyDir", "medium"), ed.Medium, err.Error()))
		}
	}
	return errs
}
