package podsource

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// standaloneDetail is why a field is refused although the API server would
// take it: what it points to lives in the API server.
const standaloneDetail = "needs an API server; berth runs standalone"

func needsAPIServer(fldPath *field.Path) *field.Error {
	return field.Forbidden(fldPath, standaloneDetail)
}

// The limits the API server puts on a pod's DNS configuration.
const (
	maxDNSNameservers = 3
	maxDNSSearchPaths = 32
)

// Validate checks a defaulted static pod the way the API server checks a pod
// on creation, for everything a standalone node must honour, and refuses what
// only an API server could provide. The messages read like the API server's.
// It is pure; the errors come in a stable order.
func Validate(pod *v1.Pod) field.ErrorList {
	meta := apivalidation.ValidateObjectMeta(&pod.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	// Labels and annotations are maps: sort so that one manifest always
	// yields the same message.
	slices.SortStableFunc(meta, func(a, b *field.Error) int {
		return cmp.Or(strings.Compare(a.Field, b.Field), strings.Compare(a.ErrorBody(), b.ErrorBody()))
	})
	return append(meta, validatePodSpec(&pod.Spec, field.NewPath("spec"))...)
}

func validatePodSpec(spec *v1.PodSpec, fldPath *field.Path) field.ErrorList {
	volumes, errs := validateVolumes(spec.Volumes, fldPath.Child("volumes"))
	errs = append(errs, validateHugePageVolumes(spec, fldPath.Child("volumes"))...)
	errs = append(errs, validateContainers(spec, volumes, fldPath)...)
	errs = append(errs, validateRestartPolicy(spec.RestartPolicy, fldPath.Child("restartPolicy"))...)
	errs = append(errs, validateDNS(spec, fldPath)...)
	errs = append(errs, validateHostAliases(spec.HostAliases, fldPath.Child("hostAliases"))...)
	errs = append(errs, validateHostUsers(spec, fldPath)...)
	if spec.TerminationGracePeriodSeconds != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(*spec.TerminationGracePeriodSeconds, fldPath.Child("terminationGracePeriodSeconds"))...)
	}
	if d := spec.ActiveDeadlineSeconds; d != nil && (*d < 1 || *d > math.MaxInt32) {
		errs = append(errs, field.Invalid(fldPath.Child("activeDeadlineSeconds"), *d, validation.InclusiveRangeError(1, math.MaxInt32)))
	}
	for _, msg := range apivalidation.NameIsDNSSubdomain(spec.NodeName, false) {
		errs = append(errs, field.Invalid(fldPath.Child("nodeName"), spec.NodeName, msg))
	}
	errs = append(errs, dnsLabel(spec.Hostname, fldPath.Child("hostname"))...)
	errs = append(errs, dnsLabel(spec.Subdomain, fldPath.Child("subdomain"))...)
	if spec.ShareProcessNamespace != nil && *spec.ShareProcessNamespace && spec.HostPID {
		errs = append(errs, field.Invalid(fldPath.Child("shareProcessNamespace"), true, "ShareProcessNamespace and HostPID cannot both be enabled"))
	}
	if sc := spec.SecurityContext; sc != nil {
		p := fldPath.Child("securityContext")
		errs = append(errs, validateIDs(sc.RunAsUser, sc.RunAsGroup, p)...)
		if sc.FSGroup != nil {
			errs = append(errs, validateGroupID(*sc.FSGroup, p.Child("fsGroup"))...)
		}
		for i, g := range sc.SupplementalGroups {
			errs = append(errs, validateGroupID(g, p.Child("supplementalGroups").Index(i))...)
		}
	}
	errs = append(errs, validatePriority(spec, fldPath)...)

	if len(spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(fldPath.Child("ephemeralContainers"), "cannot be set on create"))
	}
	if len(spec.ImagePullSecrets) > 0 {
		errs = append(errs, needsAPIServer(fldPath.Child("imagePullSecrets")))
	}
	if len(spec.ResourceClaims) > 0 {
		errs = append(errs, needsAPIServer(fldPath.Child("resourceClaims")))
	}
	if spec.RuntimeClassName != nil {
		errs = append(errs, needsAPIServer(fldPath.Child("runtimeClassName")))
	}
	return errs
}

func validateRestartPolicy(p v1.RestartPolicy, fldPath *field.Path) field.ErrorList {
	switch p {
	case v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever:
		return nil
	case "":
		return field.ErrorList{field.Required(fldPath, "")}
	}
	return field.ErrorList{field.NotSupported(fldPath, p,
		[]v1.RestartPolicy{v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever})}
}

// validateDNS checks what berth needs to write the pod's resolv.conf.
func validateDNS(spec *v1.PodSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	policyPath := fldPath.Child("dnsPolicy")
	switch spec.DNSPolicy {
	case v1.DNSClusterFirstWithHostNet, v1.DNSClusterFirst, v1.DNSDefault, v1.DNSNone:
	case "":
		errs = append(errs, field.Required(policyPath, ""))
	default:
		errs = append(errs, field.NotSupported(policyPath, spec.DNSPolicy,
			[]v1.DNSPolicy{v1.DNSClusterFirstWithHostNet, v1.DNSClusterFirst, v1.DNSDefault, v1.DNSNone}))
	}
	cfgPath := fldPath.Child("dnsConfig")
	cfg := spec.DNSConfig
	if spec.DNSPolicy == v1.DNSNone {
		if cfg == nil {
			return append(errs, field.Required(cfgPath, fmt.Sprintf("must provide `dnsConfig` when `dnsPolicy` is %s", v1.DNSNone)))
		}
		if len(cfg.Nameservers) == 0 {
			errs = append(errs, field.Required(cfgPath.Child("nameservers"), fmt.Sprintf("must provide at least one DNS nameserver when `dnsPolicy` is %s", v1.DNSNone)))
		}
	}
	if cfg == nil {
		return errs
	}
	if len(cfg.Nameservers) > maxDNSNameservers {
		errs = append(errs, field.Invalid(cfgPath.Child("nameservers"), cfg.Nameservers, fmt.Sprintf("must not have more than %d nameservers", maxDNSNameservers)))
	}
	for i, ns := range cfg.Nameservers {
		errs = append(errs, validation.IsValidIP(cfgPath.Child("nameservers").Index(i), ns)...)
	}
	if len(cfg.Searches) > maxDNSSearchPaths {
		errs = append(errs, field.Invalid(cfgPath.Child("searches"), cfg.Searches, fmt.Sprintf("must not have more than %d search paths", maxDNSSearchPaths)))
	}
	for i, s := range cfg.Searches {
		// A trailing dot marks a fully qualified name; "." alone is the root.
		if s == "." {
			continue
		}
		for _, msg := range validation.IsDNS1123Subdomain(strings.TrimSuffix(s, ".")) {
			errs = append(errs, field.Invalid(cfgPath.Child("searches").Index(i), s, msg))
		}
	}
	for i, o := range cfg.Options {
		if o.Name == "" {
			errs = append(errs, field.Required(cfgPath.Child("options").Index(i).Child("name"), "must not be empty"))
		}
	}
	return errs
}

func validateHostAliases(aliases []v1.HostAlias, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, a := range aliases {
		p := fldPath.Index(i)
		errs = append(errs, validation.IsValidIP(p.Child("ip"), a.IP)...)
		for j, h := range a.Hostnames {
			for _, msg := range validation.IsDNS1123Subdomain(h) {
				errs = append(errs, field.Invalid(p.Child("hostnames").Index(j), h, msg))
			}
		}
	}
	return errs
}

// dnsLabel checks an optional DNS-1123 label.
func dnsLabel(value string, fldPath *field.Path) field.ErrorList {
	if value == "" {
		return nil
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(value) {
		errs = append(errs, field.Invalid(fldPath, value, msg))
	}
	return errs
}

func validateIDs(user, group *int64, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if user != nil {
		for _, msg := range validation.IsValidUserID(*user) {
			errs = append(errs, field.Invalid(fldPath.Child("runAsUser"), *user, msg))
		}
	}
	if group != nil {
		errs = append(errs, validateGroupID(*group, fldPath.Child("runAsGroup"))...)
	}
	return errs
}

func validateGroupID(gid int64, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsValidGroupID(gid) {
		errs = append(errs, field.Invalid(fldPath, gid, msg))
	}
	return errs
}
