package conformance

import (
	"slices"
	"strings"
)

// Pass is one run of e2e.test: the specs its filters select. Specs
// labelled Serial get a pass of their own, after the others, run one at a
// time.
type Pass struct {
	Name        string
	LabelFilter string   // --ginkgo.label-filter; empty for none
	Focus       []string // --ginkgo.focus, each a regexp; any may match
	Skip        []string // --ginkgo.skip, each a regexp; any excludes
	Serial      bool     // its specs must run one at a time
	// OneNode leaves the first node alone schedulable while the pass runs:
	// only it watches the kubelet's plugins_registry, where the DRA specs'
	// drivers register. Specs that need two nodes skip themselves.
	OneNode bool
}

// Exclusion is a Ginkgo label the default selection never runs, and why.
type Exclusion struct{ Label, Reason string }

// Exclusions are left out of every pass unless the caller's label filter
// replaces them. CONFORMANCE.md lists the same.
func Exclusions() []Exclusion {
	return []Exclusion{
		{"Disruptive", "restarts or breaks nodes and control-plane components; never run on a shared machine"},
		{"Flaky", "upstream marks the spec unreliable"},
		{"Slow", "minutes each by design (up to 27 min); run them with FOCUS and LABEL_FILTER"},
		{"Feature", "needs a cluster feature or add-on beyond base conformance (Feature:* labels), except " +
			"Feature:" + draFeature + ", which the cluster has (DRA is on by default, berth runs DRA drivers)"},
		{"Alpha", "needs an alpha feature gate, off in the control plane"},
		{"BetaOffByDefault", "needs a beta feature gate that is off by default"},
	}
}

// draDevicePluginSpecs are the DRA specs that deploy upstream's
// sample-device-plugin image, which the harness does not build: those
// named after the device plugin, and the one of extended resources served
// by it beside a ResourceClaim (test/e2e/dra/deploy_device_plugin.go).
const draDevicePluginSpecs = `\[DRA\].* (device plugin|supports extended resources together with ResourceClaim)`

// draResourceHealthSpecs are the DRA specs of device health in the pod
// status (KEP-4680: a driver's DRAResourceHealth stream, the containers'
// allocatedResourcesStatus), which berth does not implement yet.
const draResourceHealthSpecs = `\[DRA\].* should report device health`

// draFeature is the one Feature label the cluster provides: the DRA specs
// that run a test driver through the kubelet carry it.
const draFeature = "DynamicResourceAllocation"

// excludeFilter is the label filter that drops every exclusion. Feature
// labels carry a value (Feature:SELinux), hence the key query; a spec
// needing DRA alone stays in.
func excludeFilter() string {
	var parts []string
	for _, e := range Exclusions() {
		if e.Label == "Feature" {
			parts = append(parts, "Feature: isSubsetOf {"+draFeature+"}")
			continue
		}
		parts = append(parts, "!"+e.Label)
	}
	return strings.Join(parts, " && ")
}

// Selection is what the user asks for: regexps over the specs' full
// names, and a label filter that replaces the default exclusions.
type Selection struct {
	Focus       string // empty: the default selection
	Skip        string
	LabelFilter string // empty: excludeFilter()
}

// Passes turns s into e2e.test runs. The default selection is every
// NodeConformance spec, then every sig-node Conformance spec that is not
// also NodeConformance, then every such sig-network one (Services, DNS and
// pod networking, which the harness's kube-proxy and CoreDNS provide),
// then every such sig-storage one (volumes: the API objects of CSI and
// what berth's volume manager mounts), then every DRA spec that is not
// Conformance (the DRA test driver, deployed through hostpathplugin pods,
// and what berth's DRA manager prepares; the first node alone), then the
// Serial specs of the four conformance groups, then the Serial DRA specs.
func (s Selection) Passes() []Pass {
	filter := s.LabelFilter
	if filter == "" {
		filter = excludeFilter()
	}
	var skip []string
	if s.Skip != "" {
		skip = []string{s.Skip}
	}
	and := func(parts ...string) string { return "(" + strings.Join(parts, ") && (") + ")" }
	if s.Focus != "" {
		return []Pass{
			{Name: "focus", LabelFilter: and(filter, "!Serial"), Focus: []string{s.Focus}, Skip: skip},
			{Name: "focus-serial", LabelFilter: and(filter, "Serial"), Focus: []string{s.Focus}, Skip: skip, Serial: true},
		}
	}
	const nodeConf, sigNodeConf, sigNetConf, sigStorageConf, dra = "NodeConformance", "sig-node && Conformance",
		"sig-network && Conformance", "sig-storage && Conformance", "DRA"
	return []Pass{
		{Name: "node-conformance", LabelFilter: and(filter, nodeConf, "!Serial"), Skip: skip},
		{Name: "sig-node-conformance", LabelFilter: and(filter, sigNodeConf, "!NodeConformance", "!Serial"), Skip: skip},
		{Name: "sig-network-conformance", LabelFilter: and(filter, sigNetConf, "!NodeConformance", "!Serial"), Skip: skip},
		{Name: "sig-storage-conformance", LabelFilter: and(filter, sigStorageConf, "!NodeConformance", "!Serial"), Skip: skip},
		{Name: "dra", LabelFilter: and(filter, dra, "!Conformance", "!NodeConformance", "!Serial"),
			Skip: append(slices.Clone(skip), draResourceHealthSpecs), OneNode: true},
		{Name: "serial", LabelFilter: and(filter, nodeConf+" || ("+sigNodeConf+") || ("+sigNetConf+") || ("+sigStorageConf+")", "Serial"),
			Skip: skip, Serial: true},
		{Name: "dra-serial", LabelFilter: and(filter, dra, "!Conformance", "!NodeConformance", "Serial"),
			Skip: append(slices.Clone(skip), draDevicePluginSpecs), Serial: true, OneNode: true},
	}
}
