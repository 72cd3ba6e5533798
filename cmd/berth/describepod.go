package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/internal/qos"
)

// maxAnnotationLen is where kubectl folds an annotation onto its own lines
// and cuts them.
const maxAnnotationLen = 140

// describeWriter writes describe's lines: two spaces of indent per level,
// cells separated by tabs and aligned as kubectl aligns them.
type describeWriter struct {
	tw *tabwriter.Writer
	// escaper defuses terminal control in what users and containers wrote
	// (messages, annotations), as kubectl does, so that describing a pod
	// cannot drive the terminal.
	escaper *strings.Replacer
}

func newDescribeWriter(w io.Writer) *describeWriter {
	return &describeWriter{
		tw:      tabwriter.NewWriter(w, 0, 8, 2, ' ', 0),
		escaper: strings.NewReplacer("\x1b", "^[", "\r", `\r`),
	}
}

// write formats one piece of output at level.
func (d *describeWriter) write(level int, format string, args ...any) {
	d.escaper.WriteString(d.tw, strings.Repeat("  ", level)+fmt.Sprintf(format, args...))
}

// flush ends a block of aligned columns.
func (d *describeWriter) flush() { d.tw.Flush() }

// describePod renders a pod and its events as `kubectl describe pod` does,
// with ages counted up to now, and berth's admission decision about it.
func describePod(pod *v1.Pod, adm admissionRecord, events []v1.Event, now time.Time) string {
	var b strings.Builder
	w := newDescribeWriter(&b)
	w.write(0, "Name:\t%s\n", pod.Name)
	w.write(0, "Namespace:\t%s\n", pod.Namespace)
	if pod.Spec.Priority != nil {
		w.write(0, "Priority:\t%d\n", *pod.Spec.Priority)
	}
	if pod.Spec.PriorityClassName != "" {
		w.write(0, "Priority Class Name:\t%s\n", pod.Spec.PriorityClassName)
	}
	if rc := pod.Spec.RuntimeClassName; rc != nil && *rc != "" {
		w.write(0, "Runtime Class Name:\t%s\n", *rc)
	}
	if pod.Spec.ServiceAccountName != "" {
		w.write(0, "Service Account:\t%s\n", pod.Spec.ServiceAccountName)
	}
	if pod.Spec.NodeName == "" {
		w.write(0, "Node:\t<none>\n")
	} else {
		w.write(0, "Node:\t%s/%s\n", pod.Spec.NodeName, pod.Status.HostIP)
	}
	if pod.Status.StartTime != nil {
		w.write(0, "Start Time:\t%s\n", formatTime(*pod.Status.StartTime))
	}
	writeLabels(w, "Labels", pod.Labels)
	writeAnnotations(w, "Annotations", pod.Annotations)
	if pod.DeletionTimestamp != nil && pod.Status.Phase != v1.PodFailed && pod.Status.Phase != v1.PodSucceeded {
		w.write(0, "Status:\tTerminating (lasts %s)\n", since(pod.DeletionTimestamp.Time, now))
		if pod.DeletionGracePeriodSeconds != nil {
			w.write(0, "Termination Grace Period:\t%ds\n", *pod.DeletionGracePeriodSeconds)
		}
	} else {
		w.write(0, "Status:\t%s\n", pod.Status.Phase)
	}
	if pod.Status.Reason != "" {
		w.write(0, "Reason:\t%s\n", pod.Status.Reason)
	}
	if pod.Status.Message != "" {
		writeMultiline(w, "Message", pod.Status.Message)
	}
	w.write(0, "IP:\t%s\n", pod.Status.PodIP)
	if len(pod.Status.PodIPs) == 0 {
		w.write(0, "IPs:\t<none>\n")
	} else {
		w.write(0, "IPs:\n")
		for _, ip := range pod.Status.PodIPs {
			w.write(1, "IP:\t%s\n", ip.IP)
		}
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		w.write(0, "Controlled By:\t%s/%s\n", ref.Kind, ref.Name)
	}

	// A manifest berth could not read has no spec to show: its status
	// message says what is wrong, and an empty spec would only mislead.
	if len(pod.Spec.Containers) > 0 {
		if len(pod.Spec.InitContainers) > 0 {
			writeContainers(w, "Init Containers", pod, pod.Spec.InitContainers, pod.Status.InitContainerStatuses)
		}
		writeContainers(w, "Containers", pod, pod.Spec.Containers, pod.Status.ContainerStatuses)
		if len(pod.Status.Conditions) > 0 {
			w.write(0, "Conditions:\n  Type\tStatus\n")
			for _, c := range pod.Status.Conditions {
				w.write(1, "%v \t%v \n", c.Type, c.Status)
			}
		}
		writeVolumes(w, pod.Spec.Volumes)
		class := pod.Status.QOSClass
		if class == "" {
			class = qos.PodQOSClass(pod)
		}
		w.write(0, "QoS Class:\t%s\n", class)
		writeLabels(w, "Node-Selectors", pod.Spec.NodeSelector)
		writeTolerations(w, pod.Spec.Tolerations)
	}
	writeAdmission(w, adm)
	writeEvents(w, events, now)
	w.flush()
	return b.String()
}

// describeGonePod renders the events of a pod name berth no longer runs,
// as kubectl does for a pod it cannot find but has events of.
func describeGonePod(namespace, name string, events []v1.Event, now time.Time) string {
	var b strings.Builder
	w := newDescribeWriter(&b)
	w.write(0, "Pod '%s': error 'pod %s/%s not found', but found events.\n", name, namespace, name)
	writeEvents(w, events, now)
	w.flush()
	return b.String()
}

// formatTime is kubectl's format for points in time.
func formatTime(t metav1.Time) string { return t.Format(time.RFC1123Z) }

// writeMultiline writes "Title: value", a value of several lines aligned
// under its first.
func writeMultiline(w *describeWriter, title, value string) {
	for i, line := range strings.Split(strings.TrimSuffix(value, "\n"), "\n") {
		if i == 0 {
			w.write(0, "%s:\t%s\n", title, line)
		} else {
			w.write(0, "\t%s\n", line)
		}
	}
}

func writeLabels(w *describeWriter, title string, labels map[string]string) {
	w.write(0, "%s:\t", title)
	if len(labels) == 0 {
		w.write(0, "<none>\n")
		return
	}
	for i, k := range sortedKeys(labels) {
		if i > 0 {
			w.write(0, "\t")
		}
		w.write(0, "%s=%s\n", k, labels[k])
	}
}

// writeAnnotations writes annotations as kubectl does: long or multi-line
// values go below their key, each line cut at maxAnnotationLen.
func writeAnnotations(w *describeWriter, title string, annotations map[string]string) {
	w.write(0, "%s:\t", title)
	var keys []string
	for _, k := range sortedKeys(annotations) {
		// kubectl apply's record of the object is noise here.
		if k != v1.LastAppliedConfigAnnotation {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		w.write(0, "<none>\n")
		return
	}
	for i, k := range keys {
		if i > 0 {
			w.write(0, "\t")
		}
		value := strings.TrimSuffix(annotations[k], "\n")
		if len(k)+len(value)+2 <= maxAnnotationLen && !strings.Contains(value, "\n") {
			w.write(0, "%s: %s\n", k, value)
			continue
		}
		w.write(0, "%s:\n", k)
		for _, line := range strings.Split(value, "\n") {
			if len(line) > maxAnnotationLen-2 {
				line = line[:maxAnnotationLen-2] + "..."
			}
			w.write(0, "\t  %s\n", line)
		}
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func writeTolerations(w *describeWriter, tolerations []v1.Toleration) {
	w.write(0, "Tolerations:\t")
	if len(tolerations) == 0 {
		w.write(0, "<none>\n")
		return
	}
	sorted := slices.Clone(tolerations)
	slices.SortStableFunc(sorted, func(a, b v1.Toleration) int { return strings.Compare(a.Key, b.Key) })
	for i, t := range sorted {
		if i > 0 {
			w.write(0, "\t")
		}
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		if t.Effect != "" {
			s += ":" + string(t.Effect)
		}
		// An Exists with neither key nor effect tolerates everything.
		if t.Operator == v1.TolerationOpExists && t.Value == "" {
			if s != "" {
				s += " "
			}
			s += "op=Exists"
		}
		if t.TolerationSeconds != nil {
			s += fmt.Sprintf(" for %ds", *t.TolerationSeconds)
		}
		w.write(0, "%s\n", s)
	}
}

// writeVolumes describes the volume kinds berth mounts; others, which berth
// refuses, show as unknown.
func writeVolumes(w *describeWriter, volumes []v1.Volume) {
	if len(volumes) == 0 {
		w.write(0, "Volumes:\t<none>\n")
		return
	}
	w.write(0, "Volumes:\n")
	for _, vol := range volumes {
		w.write(1, "%s:\n", vol.Name)
		switch {
		case vol.HostPath != nil:
			hostPathType := "<none>"
			if vol.HostPath.Type != nil {
				hostPathType = string(*vol.HostPath.Type)
			}
			w.write(2, "Type:\tHostPath (bare host directory volume)\n")
			w.write(2, "Path:\t%s\n", vol.HostPath.Path)
			w.write(2, "HostPathType:\t%s\n", hostPathType)
		case vol.EmptyDir != nil:
			sizeLimit := "<unset>"
			if l := vol.EmptyDir.SizeLimit; l != nil && l.Sign() > 0 {
				sizeLimit = l.String()
			}
			w.write(2, "Type:\tEmptyDir (a temporary directory that shares a pod's lifetime)\n")
			w.write(2, "Medium:\t%s\n", vol.EmptyDir.Medium)
			w.write(2, "SizeLimit:\t%s\n", sizeLimit)
		default:
			w.write(1, "<unknown>\n")
		}
	}
}

// writeEvents writes the events table, least recently seen first; a
// repeated event shows when it was last seen, how often, and since when:
// "2m (x3 over 10m)".
func writeEvents(w *describeWriter, events []v1.Event, now time.Time) {
	if len(events) == 0 {
		w.write(0, "Events:\t<none>\n")
		return
	}
	// The table's columns are its own, not those of the lines above.
	w.flush()
	sorted := slices.Clone(events)
	slices.SortStableFunc(sorted, func(a, b v1.Event) int { return eventTime(&a).Compare(eventTime(&b)) })
	w.write(0, "Events:\n  Type\tReason\tAge\tFrom\tMessage\n")
	w.write(1, "----\t------\t----\t----\t-------\n")
	for i := range sorted {
		e := &sorted[i]
		first := since(e.FirstTimestamp.Time, now)
		if !e.EventTime.IsZero() {
			first = since(e.EventTime.Time, now)
		}
		age := first
		switch {
		case e.Series != nil:
			age = fmt.Sprintf("%s (x%d over %s)", since(e.Series.LastObservedTime.Time, now), e.Series.Count, first)
		case e.Count > 1:
			age = fmt.Sprintf("%s (x%d over %s)", since(e.LastTimestamp.Time, now), e.Count, first)
		}
		from := e.Source.Component
		if from == "" {
			from = e.ReportingController
		}
		w.write(1, "%s\t%s\t%s\t%s\t%s\n", e.Type, e.Reason, age, from, strings.TrimSpace(e.Message))
	}
}

// eventTime is when an event was last seen, whichever API wrote it.
func eventTime(e *v1.Event) time.Time {
	switch {
	case e.Series != nil:
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	}
	return e.EventTime.Time
}
