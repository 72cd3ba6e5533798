package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/internal/admission"
	"github.com/berth-dev/berth/internal/v1helper"
)

// admissionRecord is what describe learned of a pod's admission: berth's
// decision, or why it could not be had. The zero value, for a pod berth
// keeps no record of, describes nothing.
type admissionRecord struct {
	result *admission.Result
	err    error
}

// writeAdmission writes the Admission block: the decision, and what it
// rests on, the checks a rejected pod failed or the preemption a critical
// pod caused.
func writeAdmission(w *describeWriter, rec admissionRecord) {
	if rec.err != nil {
		// The rest of the pod is still worth showing.
		w.write(0, "Admission:\t<error: %v>\n", rec.err)
		return
	}
	r := rec.result
	if r == nil {
		return
	}
	w.write(0, "Admission:\n")
	w.write(1, "Result:\t%s\n", admissionOutcome(r))
	if !r.Admit && r.Message != "" {
		w.write(1, "Message:\t%s\n", r.Message)
	}
	if r.Note != "" {
		w.write(1, "Note:\t%s\n", r.Note)
	}
	if r.Preemption != nil {
		writePreemption(w, r.Preemption)
		return
	}
	if r.Admit {
		return
	}
	if len(r.Insufficient) > 0 || len(r.Failures) > 0 {
		w.write(1, "Failed checks:\n")
		for _, in := range r.Insufficient {
			w.write(2, "Insufficient %s:\trequested %s, used %s, allocatable %s, short by %s\n", in.Resource,
				formatAmount(in.Resource, in.Requested), formatAmount(in.Resource, in.Used),
				formatAmount(in.Resource, in.Capacity), formatAmount(in.Resource, in.Shortfall()))
		}
		for _, f := range r.Failures {
			w.write(2, "%s:\t%s\n", f.Name, f.Description)
		}
	}
	if r.NoPreemption != "" {
		// Not aligned with the checks above: it is not one of them.
		w.flush()
		w.write(1, "Preemption:\t%s\n", r.NoPreemption)
	}
}

// admissionOutcome is the Result line: "Admitted", "Rejected (OutOfcpu)",
// "Admitted after preempting 2 pods".
func admissionOutcome(r *admission.Result) string {
	switch {
	case r.Admit && r.Preemption != nil:
		n := len(r.Preemption.Victims)
		if n == 1 {
			return "Admitted after preempting 1 pod"
		}
		return fmt.Sprintf("Admitted after preempting %d pods", n)
	case r.Admit:
		return "Admitted"
	case r.Reason != "":
		return "Rejected (" + r.Reason + ")"
	}
	return "Rejected"
}

// writePreemption explains a critical pod's preemption: what had to be
// freed, whom it could take it from, whom it took, in kill order, and why
// it spared the others. Each table gets its own columns.
func writePreemption(w *describeWriter, p *admission.Preemption) {
	if len(p.Requirements) == 0 {
		w.write(1, "Requirements:\t<none>\n")
	} else {
		w.write(1, "Requirements:\n")
		for _, r := range p.Requirements {
			w.write(2, "%s:\t%s\n", r.Resource, formatAmount(r.Resource, r.Quantity))
		}
	}
	w.flush()
	if len(p.Candidates) == 0 {
		w.write(1, "Candidates:\t<none>\n")
	} else {
		w.write(1, "Candidates:\n")
		w.write(2, "POD\tQOS\tREQUESTS\n")
		for _, c := range p.Candidates {
			w.write(2, "%s\t%s\t%s\n", c.Pod, c.QOS, formatRequests(c.Requests))
		}
	}
	w.flush()
	if len(p.Victims) == 0 {
		w.write(1, "Victims:\t<none>\n")
	} else {
		w.write(1, "Victims:\n")
		w.write(2, "ORDER\tPOD\tQOS\tDISTANCE\tREMAINING BEFORE\n")
		for i, v := range p.Victims {
			w.write(2, "%d\t%s\t%s\t%.4g\t%s\n", i+1, v.Pod, v.QOS, v.Distance, formatRequirements(v.Remaining))
		}
	}
	w.flush()
	if len(p.PassedOver) == 0 {
		w.write(1, "Passed over:\t<none>\n")
	} else {
		w.write(1, "Passed over:\n")
		w.write(2, "POD\tWHY\n")
		for _, po := range p.PassedOver {
			why := po.Why
			if po.Distance != nil {
				why += fmt.Sprintf(" (its distance was %.4g)", *po.Distance)
			}
			w.write(2, "%s\t%s\n", po.Pod, why)
		}
	}
	w.flush()
}

// formatAmount shows an amount in admission's integer units the way a
// manifest would say it: cpu in millicores, byte counts as binary
// quantities, and counts (pods, devices) as they are.
func formatAmount(name v1.ResourceName, v int64) string {
	switch {
	case name == v1.ResourceCPU:
		return strconv.FormatInt(v, 10) + "m"
	case name == v1.ResourceMemory, name == v1.ResourceEphemeralStorage, v1helper.IsHugePages(name):
		return resource.NewQuantity(v, resource.BinarySI).String()
	}
	return strconv.FormatInt(v, 10)
}

// formatRequests is "cpu=500m, memory=128Mi", in the order admission
// checks resources; "<none>" for a pod that requests nothing.
func formatRequests(requests map[v1.ResourceName]int64) string {
	if len(requests) == 0 {
		return "<none>"
	}
	names := make([]v1.ResourceName, 0, len(requests))
	for name, v := range requests {
		if v != 0 {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "<none>"
	}
	slices.SortFunc(names, compareResources)
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = string(name) + "=" + formatAmount(name, requests[name])
	}
	return strings.Join(parts, ", ")
}

// formatRequirements is what was left to free, in formatRequests' form.
func formatRequirements(rs admission.Requirements) string {
	m := make(map[v1.ResourceName]int64, len(rs))
	for _, r := range rs {
		m[r.Resource] += r.Quantity
	}
	return formatRequests(m)
}

// compareResources orders resource names as admission checks them: cpu,
// memory, ephemeral-storage, then the rest by name.
func compareResources(a, b v1.ResourceName) int {
	rank := func(n v1.ResourceName) int {
		switch n {
		case v1.ResourceCPU:
			return 0
		case v1.ResourceMemory:
			return 1
		case v1.ResourceEphemeralStorage:
			return 2
		}
		return 3
	}
	if ra, rb := rank(a), rank(b); ra != rb {
		return ra - rb
	}
	return strings.Compare(string(a), string(b))
}
