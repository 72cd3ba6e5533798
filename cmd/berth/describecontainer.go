package main

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// writeContainers writes the containers of one kind (init or regular) with
// their statuses, as kubectl does.
func writeContainers(w *describeWriter, title string, pod *v1.Pod, containers []v1.Container, statuses []v1.ContainerStatus) {
	if len(containers) == 0 {
		w.write(0, "%s: <none>\n", title)
		return
	}
	w.write(0, "%s:\n", title)
	for i := range containers {
		c := &containers[i]
		var status *v1.ContainerStatus
		if j := slices.IndexFunc(statuses, func(s v1.ContainerStatus) bool { return s.Name == c.Name }); j >= 0 {
			status = &statuses[j]
		}

		w.write(1, "%s:\n", c.Name)
		if status != nil {
			w.write(2, "Container ID:\t%s\n", status.ContainerID)
		}
		w.write(2, "Image:\t%s\n", c.Image)
		if status != nil {
			w.write(2, "Image ID:\t%s\n", status.ImageID)
		}
		writePorts(w, c.Ports)
		writeLines(w, "Command", c.Command)
		writeLines(w, "Args", c.Args)
		if status != nil {
			writeState(w, "State", status.State)
			if status.LastTerminationState.Terminated != nil {
				writeState(w, "Last State", status.LastTerminationState)
			}
			w.write(2, "Ready:\t%s\n", printBool(status.Ready))
			w.write(2, "Restart Count:\t%d\n", status.RestartCount)
		}
		writeResources(w, &c.Resources)
		for _, p := range []struct {
			title string
			probe *v1.Probe
		}{{"Liveness", c.LivenessProbe}, {"Readiness", c.ReadinessProbe}, {"Startup", c.StartupProbe}} {
			if p.probe != nil {
				w.write(2, "%s:\t%s\n", p.title, describeProbe(p.probe))
			}
		}
		writeEnvFrom(w, c.EnvFrom)
		writeEnv(w, pod, c)
		writeMounts(w, c.VolumeMounts)
	}
}

func writePorts(w *describeWriter, ports []v1.ContainerPort) {
	var container, host []string
	for _, p := range ports {
		container = append(container, fmt.Sprintf("%d/%s", p.ContainerPort, p.Protocol))
		host = append(host, fmt.Sprintf("%d/%s", p.HostPort, p.Protocol))
	}
	for _, row := range []struct {
		one, many string
		ports     []string
	}{{"Port", "Ports", container}, {"Host Port", "Host Ports", host}} {
		switch len(row.ports) {
		case 0:
			w.write(2, "%s:\t<none>\n", row.one)
		case 1:
			w.write(2, "%s:\t%s\n", row.one, row.ports[0])
		default:
			w.write(2, "%s:\t%s\n", row.many, strings.Join(row.ports, ", "))
		}
	}
}

// writeLines writes a command or its arguments one per line.
func writeLines(w *describeWriter, title string, args []string) {
	if len(args) == 0 {
		return
	}
	w.write(2, "%s:\n", title)
	for _, arg := range args {
		for _, line := range strings.Split(arg, "\n") {
			w.write(3, "%s\n", line)
		}
	}
}

func writeState(w *describeWriter, title string, state v1.ContainerState) {
	switch {
	case state.Running != nil:
		w.write(2, "%s:\tRunning\n", title)
		w.write(3, "Started:\t%s\n", formatTime(state.Running.StartedAt))
	case state.Terminated != nil:
		t := state.Terminated
		w.write(2, "%s:\tTerminated\n", title)
		if t.Reason != "" {
			w.write(3, "Reason:\t%s\n", t.Reason)
		}
		if t.Message != "" {
			w.write(3, "Message:\t%s\n", t.Message)
		}
		w.write(3, "Exit Code:\t%d\n", t.ExitCode)
		if t.Signal > 0 {
			w.write(3, "Signal:\t%d\n", t.Signal)
		}
		w.write(3, "Started:\t%s\n", formatTime(t.StartedAt))
		w.write(3, "Finished:\t%s\n", formatTime(t.FinishedAt))
	default:
		w.write(2, "%s:\tWaiting\n", title)
		if wt := state.Waiting; wt != nil {
			if wt.Reason != "" {
				w.write(3, "Reason:\t%s\n", wt.Reason)
			}
			// kubectl leaves the message out; on a node without an API
			// server it is the only place to read why a container waits
			// (the image that cannot be pulled, the back-off left).
			if wt.Message != "" {
				w.write(3, "Message:\t%s\n", wt.Message)
			}
		}
	}
}

func printBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

func writeResources(w *describeWriter, r *v1.ResourceRequirements) {
	for _, list := range []struct {
		title string
		l     v1.ResourceList
	}{{"Limits", r.Limits}, {"Requests", r.Requests}} {
		if len(list.l) == 0 {
			continue
		}
		w.write(2, "%s:\n", list.title)
		names := make([]string, 0, len(list.l))
		for name := range list.l {
			names = append(names, string(name))
		}
		sort.Strings(names)
		for _, name := range names {
			q := list.l[v1.ResourceName(name)]
			w.write(3, "%s:\t%s\n", name, q.String())
		}
	}
}

// describeProbe is kubectl's one-line probe, e.g.
// "http-get http://:8080/healthz delay=0s timeout=1s period=10s #success=1 #failure=3".
func describeProbe(p *v1.Probe) string {
	attrs := fmt.Sprintf("delay=%ds timeout=%ds period=%ds #success=%d #failure=%d",
		p.InitialDelaySeconds, p.TimeoutSeconds, p.PeriodSeconds, p.SuccessThreshold, p.FailureThreshold)
	switch {
	case p.Exec != nil:
		return fmt.Sprintf("exec %v %s", p.Exec.Command, attrs)
	case p.HTTPGet != nil:
		u := url.URL{Scheme: strings.ToLower(string(p.HTTPGet.Scheme)), Host: p.HTTPGet.Host, Path: p.HTTPGet.Path}
		if port := p.HTTPGet.Port.String(); port != "" {
			u.Host = net.JoinHostPort(p.HTTPGet.Host, port)
		}
		return fmt.Sprintf("http-get %s %s", u.String(), attrs)
	case p.TCPSocket != nil:
		return fmt.Sprintf("tcp-socket %s:%s %s", p.TCPSocket.Host, p.TCPSocket.Port.String(), attrs)
	case p.GRPC != nil:
		service := ""
		if p.GRPC.Service != nil {
			service = *p.GRPC.Service
		}
		return fmt.Sprintf("grpc <pod>:%d %s %s", p.GRPC.Port, service, attrs)
	}
	return "unknown " + attrs
}

func writeEnvFrom(w *describeWriter, from []v1.EnvFromSource) {
	if len(from) == 0 {
		return
	}
	w.write(2, "Environment Variables from:\n")
	for _, e := range from {
		var kind, name string
		var optional *bool
		switch {
		case e.ConfigMapRef != nil:
			kind, name, optional = "ConfigMap", e.ConfigMapRef.Name, e.ConfigMapRef.Optional
		case e.SecretRef != nil:
			kind, name, optional = "Secret", e.SecretRef.Name, e.SecretRef.Optional
		}
		if e.Prefix != "" {
			kind += fmt.Sprintf(" with prefix '%s'", e.Prefix)
		}
		w.write(3, "%s\t%s\tOptional: %t\n", name, kind, optional != nil && *optional)
	}
}

func writeEnv(w *describeWriter, pod *v1.Pod, c *v1.Container) {
	if len(c.Env) == 0 {
		w.write(2, "Environment:\t<none>\n")
		return
	}
	w.write(2, "Environment:\n")
	for _, e := range c.Env {
		src := e.ValueFrom
		switch {
		case src == nil:
			for i, line := range strings.Split(e.Value, "\n") {
				if i == 0 {
					w.write(3, "%s:\t%s\n", e.Name, line)
				} else {
					w.write(3, "\t%s\n", line)
				}
			}
		case src.FieldRef != nil:
			w.write(3, "%s:\t%s (%s:%s)\n", e.Name, podFieldValue(pod, src.FieldRef.FieldPath), src.FieldRef.APIVersion, src.FieldRef.FieldPath)
		case src.ResourceFieldRef != nil:
			w.write(3, "%s:\t%s (%s)\n", e.Name, resourceFieldValue(c, src.ResourceFieldRef), src.ResourceFieldRef.Resource)
		case src.SecretKeyRef != nil:
			ref := src.SecretKeyRef
			w.write(3, "%s:\t<set to the key '%s' in secret '%s'>\tOptional: %t\n", e.Name, ref.Key, ref.Name, ref.Optional != nil && *ref.Optional)
		case src.ConfigMapKeyRef != nil:
			ref := src.ConfigMapKeyRef
			w.write(3, "%s:\t<set to the key '%s' of config map '%s'>\tOptional: %t\n", e.Name, ref.Key, ref.Name, ref.Optional != nil && *ref.Optional)
		}
	}
}

// podFieldValue resolves the downward API's pod fields that the served pod
// shows; others are left blank, as kubectl leaves what it cannot resolve.
func podFieldValue(pod *v1.Pod, path string) string {
	switch path {
	case "metadata.name":
		return pod.Name
	case "metadata.namespace":
		return pod.Namespace
	case "metadata.uid":
		return string(pod.UID)
	case "spec.nodeName":
		return pod.Spec.NodeName
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName
	case "status.hostIP":
		return pod.Status.HostIP
	case "status.podIP":
		return pod.Status.PodIP
	}
	if key, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[key]
	}
	if key, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[key]
	}
	return ""
}

// subscript reads the key of a path like metadata.labels['app'].
func subscript(path, field string) (string, bool) {
	key, ok := strings.CutPrefix(path, field+"['")
	if !ok || !strings.HasSuffix(key, "']") {
		return "", false
	}
	return strings.TrimSuffix(key, "']"), true
}

// resourceFieldValue is what the kubelet puts in a resourceFieldRef
// variable: the container's request or limit in units of the divisor,
// rounded up. An unset cpu or memory limit is the node's allocatable.
func resourceFieldValue(c *v1.Container, ref *v1.ResourceFieldSelector) string {
	kind, name, _ := strings.Cut(ref.Resource, ".")
	list := c.Resources.Requests
	if kind == "limits" {
		list = c.Resources.Limits
	}
	q, ok := list[v1.ResourceName(name)]
	if !ok && kind == "limits" && (name == "cpu" || name == "memory") {
		return "node allocatable"
	}
	divisor := ref.Divisor
	if divisor.Sign() <= 0 {
		return q.String()
	}
	if name == "cpu" {
		return fmt.Sprint(int64(math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue()))))
	}
	return fmt.Sprint(int64(math.Ceil(float64(q.Value()) / float64(divisor.Value()))))
}

func writeMounts(w *describeWriter, mounts []v1.VolumeMount) {
	if len(mounts) == 0 {
		w.write(2, "Mounts:\t<none>\n")
		return
	}
	w.write(2, "Mounts:\n")
	sorted := slices.Clone(mounts)
	slices.SortStableFunc(sorted, func(a, b v1.VolumeMount) int { return strings.Compare(a.MountPath, b.MountPath) })
	for _, m := range sorted {
		flags := "rw"
		if m.ReadOnly {
			flags = "ro"
		}
		if m.SubPath != "" {
			flags += fmt.Sprintf(",path=%q", m.SubPath)
		}
		w.write(3, "%s from %s (%s)\n", m.MountPath, m.Name, flags)
	}
}
