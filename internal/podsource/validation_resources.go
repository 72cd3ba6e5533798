package podsource

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/berth-dev/berth/internal/v1helper"
)

// validateResources checks a container's requests and limits. Maps are
// walked in name order so that a manifest always yields the same message.
func validateResources(r *v1.ResourceRequirements, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	limPath, reqPath := fldPath.Child("limits"), fldPath.Child("requests")
	for _, name := range sortedNames(r.Limits) {
		p := limPath.Key(string(name))
		errs = append(errs, validateContainerResourceName(name, p)...)
		errs = append(errs, validateQuantity(name, r.Limits[name], p)...)
	}
	for _, name := range sortedNames(r.Requests) {
		p := reqPath.Key(string(name))
		q := r.Requests[name]
		errs = append(errs, validateContainerResourceName(name, p)...)
		errs = append(errs, validateQuantity(name, q, p)...)
		limit, ok := r.Limits[name]
		switch {
		case !ok && !isOvercommitAllowed(name):
			errs = append(errs, field.Required(limPath, "Limit must be set for non overcommitable resources"))
		case !ok:
		case q.Cmp(limit) != 0 && !isOvercommitAllowed(name):
			errs = append(errs, field.Invalid(p, q.String(), fmt.Sprintf("must be equal to %s limit of %s", name, limit.String())))
		case q.Cmp(limit) > 0:
			errs = append(errs, field.Invalid(p, q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
		}
	}
	if len(r.Claims) > 0 {
		errs = append(errs, needsAPIServer(fldPath.Child("claims")))
	}
	return errs
}

func sortedNames(list v1.ResourceList) []v1.ResourceName {
	names := make([]v1.ResourceName, 0, len(list))
	for name := range list {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func validateQuantity(name v1.ResourceName, q resource.Quantity, fldPath *field.Path) field.ErrorList {
	if q.Sign() < 0 {
		return field.ErrorList{field.Invalid(fldPath, q.String(), "must be greater than or equal to 0")}
	}
	if v1helper.IsExtendedResourceName(name) && q.MilliValue()%1000 != 0 {
		return field.ErrorList{field.Invalid(fldPath, q.String(), "must be an integer")}
	}
	return nil
}

// validateContainerResourceName accepts cpu, memory, ephemeral-storage,
// hugepages-<size> and extended resources ("example.com/gpu").
func validateContainerResourceName(name v1.ResourceName, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range content.IsLabelKey(string(name)) {
		errs = append(errs, field.Invalid(fldPath, name, msg))
	}
	switch {
	case !strings.Contains(string(name), "/"):
		if !isStandardContainerResource(name) {
			errs = append(errs, field.Invalid(fldPath, name, "must be a standard resource for containers"))
		}
	case !v1helper.IsNativeResource(name) && !v1helper.IsExtendedResourceName(name):
		errs = append(errs, field.Invalid(fldPath, name, "doesn't follow extended resource name standard"))
	}
	return errs
}

func isStandardContainerResource(name v1.ResourceName) bool {
	switch name {
	case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage:
		return true
	}
	return v1helper.IsHugePages(name)
}

// isOvercommitAllowed: only native resources other than huge pages may be
// requested below their limit.
func isOvercommitAllowed(name v1.ResourceName) bool {
	return v1helper.IsNativeResource(name) && !v1helper.IsHugePages(name)
}

// validateResourceFieldSelector accepts the resources the kubelet can put in
// an environment variable, with the divisors it understands.
func validateResourceFieldSelector(sel *v1.ResourceFieldSelector, containers map[string]bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if sel.ContainerName != "" && !containers[sel.ContainerName] {
		errs = append(errs, field.NotFound(fldPath.Child("containerName"), sel.ContainerName))
	}
	supported := []string{
		"limits.cpu", "limits.memory", "limits.ephemeral-storage",
		"requests.cpu", "requests.memory", "requests.ephemeral-storage",
	}
	res := sel.Resource
	hugePages := strings.HasPrefix(res, "limits."+v1.ResourceHugePagesPrefix) || strings.HasPrefix(res, "requests."+v1.ResourceHugePagesPrefix)
	switch {
	case res == "":
		return append(errs, field.Required(fldPath.Child("resource"), ""))
	case !hugePages && !slices.Contains(supported, res):
		return append(errs, field.NotSupported(fldPath.Child("resource"), res, supported))
	}
	divisors, kind := []string{"1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei"}, "memory"
	switch {
	case strings.HasSuffix(res, ".cpu"):
		divisors, kind = []string{"1m", "1"}, "cpu"
	case strings.HasSuffix(res, ".ephemeral-storage"):
		kind = "local ephemeral storage"
	case hugePages:
		kind = "hugepages"
	}
	for _, d := range divisors {
		if sel.Divisor.Cmp(resource.MustParse(d)) == 0 {
			return errs
		}
	}
	return append(errs, field.Invalid(fldPath.Child("divisor"), sel.Divisor.String(),
		fmt.Sprintf("only divisor's values %s are supported with the %s resource", strings.Join(divisors, ", "), kind)))
}
