package podsource

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// handler is one way of acting on a container (exec, httpGet, ...): whether
// the manifest sets it, and how to check it.
type handler struct {
	name     string
	set      bool
	validate func(*field.Path) field.ErrorList
}

// validateOneHandler requires exactly one of the handlers to be set.
func validateOneHandler(handlers []handler, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := 0
	for _, h := range handlers {
		if !h.set {
			continue
		}
		if n++; n > 1 {
			errs = append(errs, field.Forbidden(fldPath.Child(h.name), "may not specify more than 1 handler type"))
			continue
		}
		errs = append(errs, h.validate(fldPath.Child(h.name))...)
	}
	if n == 0 {
		errs = append(errs, field.Required(fldPath, "must specify a handler type"))
	}
	return errs
}

func validateProbes(c *v1.Container, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateProbe(c.LivenessProbe, true, fldPath.Child("livenessProbe"))...)
	errs = append(errs, validateProbe(c.ReadinessProbe, false, fldPath.Child("readinessProbe"))...)
	errs = append(errs, validateProbe(c.StartupProbe, true, fldPath.Child("startupProbe"))...)
	return errs
}

// validateProbe checks one probe; restarts says whether its failure restarts
// the container (liveness and startup), which changes two rules.
func validateProbe(p *v1.Probe, restarts bool, fldPath *field.Path) field.ErrorList {
	if p == nil {
		return nil
	}
	h := p.ProbeHandler
	errs := validateOneHandler([]handler{
		{"exec", h.Exec != nil, func(fp *field.Path) field.ErrorList { return validateExec(h.Exec, fp) }},
		{"httpGet", h.HTTPGet != nil, func(fp *field.Path) field.ErrorList { return validateHTTPGet(h.HTTPGet, fp) }},
		{"tcpSocket", h.TCPSocket != nil, func(fp *field.Path) field.ErrorList { return validatePortNumOrName(h.TCPSocket.Port, fp.Child("port")) }},
		{"grpc", h.GRPC != nil, func(fp *field.Path) field.ErrorList { return validatePortNum(h.GRPC.Port, fp.Child("port")) }},
	}, fldPath)
	for _, f := range []struct {
		name  string
		value int32
	}{
		{"initialDelaySeconds", p.InitialDelaySeconds},
		{"timeoutSeconds", p.TimeoutSeconds},
		{"periodSeconds", p.PeriodSeconds},
		{"successThreshold", p.SuccessThreshold},
		{"failureThreshold", p.FailureThreshold},
	} {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(f.value), fldPath.Child(f.name))...)
	}
	if restarts && p.SuccessThreshold != 1 {
		errs = append(errs, field.Invalid(fldPath.Child("successThreshold"), p.SuccessThreshold, "must be 1"))
	}
	if g := p.TerminationGracePeriodSeconds; g != nil {
		switch {
		case !restarts:
			errs = append(errs, field.Invalid(fldPath.Child("terminationGracePeriodSeconds"), *g, "must not be set for readinessProbes"))
		case *g <= 0:
			errs = append(errs, field.Invalid(fldPath.Child("terminationGracePeriodSeconds"), *g, "must be greater than 0"))
		}
	}
	return errs
}

func validateLifecycle(l *v1.Lifecycle, gracePeriod *int64, fldPath *field.Path) field.ErrorList {
	if l == nil {
		return nil
	}
	var errs field.ErrorList
	for _, hook := range []struct {
		name string
		h    *v1.LifecycleHandler
	}{{"postStart", l.PostStart}, {"preStop", l.PreStop}} {
		if hook.h == nil {
			continue
		}
		h := hook.h
		errs = append(errs, validateOneHandler([]handler{
			{"exec", h.Exec != nil, func(fp *field.Path) field.ErrorList { return validateExec(h.Exec, fp) }},
			{"httpGet", h.HTTPGet != nil, func(fp *field.Path) field.ErrorList { return validateHTTPGet(h.HTTPGet, fp) }},
			{"tcpSocket", h.TCPSocket != nil, func(fp *field.Path) field.ErrorList { return validatePortNumOrName(h.TCPSocket.Port, fp.Child("port")) }},
			{"sleep", h.Sleep != nil, func(fp *field.Path) field.ErrorList { return validateSleep(h.Sleep, gracePeriod, fp) }},
		}, fldPath.Child(hook.name))...)
	}
	if l.StopSignal != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("stopSignal"), "is not supported by berth"))
	}
	return errs
}

func validateExec(e *v1.ExecAction, fldPath *field.Path) field.ErrorList {
	if len(e.Command) == 0 {
		return field.ErrorList{field.Required(fldPath.Child("command"), "")}
	}
	return nil
}

func validateHTTPGet(h *v1.HTTPGetAction, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if h.Path == "" {
		errs = append(errs, field.Required(fldPath.Child("path"), ""))
	}
	errs = append(errs, validatePortNumOrName(h.Port, fldPath.Child("port"))...)
	errs = append(errs, oneOfEnum(h.Scheme, fldPath.Child("scheme"), v1.URISchemeHTTP, v1.URISchemeHTTPS)...)
	for i, hdr := range h.HTTPHeaders {
		for _, msg := range validation.IsHTTPHeaderName(hdr.Name) {
			errs = append(errs, field.Invalid(fldPath.Child("httpHeaders").Index(i).Child("name"), hdr.Name, msg))
		}
	}
	return errs
}

func validateSleep(s *v1.SleepAction, gracePeriod *int64, fldPath *field.Path) field.ErrorList {
	if s.Seconds < 0 || (gracePeriod != nil && s.Seconds > *gracePeriod) {
		grace := int64(v1.DefaultTerminationGracePeriodSeconds)
		if gracePeriod != nil {
			grace = *gracePeriod
		}
		return field.ErrorList{field.Invalid(fldPath.Child("seconds"), s.Seconds,
			fmt.Sprintf("must be non-negative and less than terminationGracePeriodSeconds (%d)", grace))}
	}
	return nil
}

func validatePortNum(port int32, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsValidPortNum(int(port)) {
		errs = append(errs, field.Invalid(fldPath, port, msg))
	}
	return errs
}

func validatePortNumOrName(port intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	if port.Type == intstr.Int {
		return validatePortNum(port.IntVal, fldPath)
	}
	var errs field.ErrorList
	for _, msg := range validation.IsValidPortName(port.StrVal) {
		errs = append(errs, field.Invalid(fldPath, port.StrVal, msg))
	}
	return errs
}
