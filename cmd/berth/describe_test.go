package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/internal/server"
)

// event builds an event about default/web first seen first ago and last
// seen last ago.
func event(typ, reason, message string, count int32, first, last time.Duration) v1.Event {
	return v1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: "default", Name: "web." + reason},
		InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web", UID: "uid-web", APIVersion: "v1"},
		Type:           typ, Reason: reason, Message: message, Count: count,
		FirstTimestamp: *ago(first), LastTimestamp: *ago(last),
		Source:              v1.EventSource{Component: "berth", Host: "node-1"},
		ReportingController: "berth", ReportingInstance: "node-1",
	}
}

// fullPod exercises every part of a description.
func fullPod() *v1.Pod {
	p := pod("app")
	p.UID = "uid-web"
	p.Labels = map[string]string{"app": "web", "tier": "frontend"}
	p.Annotations = map[string]string{
		"berth.dev/pod-cgroup":         "/kubepods/burstable/poduid-web",
		"kubernetes.io/config.source":  "file",
		v1.LastAppliedConfigAnnotation: "{}",
		"example.com/long":             "line one\nline two",
	}
	p.Spec.NodeName = "node-1"
	p.Spec.Priority = ptr.To[int32](2000001000)
	p.Spec.PriorityClassName = "system-node-critical"
	p.Spec.InitContainers = []v1.Container{{Name: "setup", Image: "busybox:1.36", Command: []string{"sh", "-c", "echo ready > /work/flag"},
		VolumeMounts: []v1.VolumeMount{{Name: "work", MountPath: "/work"}}}}
	p.Spec.Containers[0] = v1.Container{
		Name:  "app",
		Image: "127.0.0.1:5000/web:v2",
		Args:  []string{"--port=8080", "--motd=hello\nworld"},
		Ports: []v1.ContainerPort{{ContainerPort: 8080, Protocol: v1.ProtocolTCP}, {Name: "metrics", ContainerPort: 9090, HostPort: 19090, Protocol: v1.ProtocolTCP}},
		Resources: v1.ResourceRequirements{
			Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("128Mi"), v1.ResourceCPU: resource.MustParse("500m")},
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("64Mi")},
		},
		LivenessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080), Scheme: v1.URISchemeHTTP}},
			TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3},
		ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/ready"}}},
			InitialDelaySeconds: 5, TimeoutSeconds: 1, PeriodSeconds: 5, SuccessThreshold: 1, FailureThreshold: 3},
		Env: []v1.EnvVar{
			{Name: "MODE", Value: "production"},
			{Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
			{Name: "TIER", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels['tier']"}}},
			{Name: "MEM_MB", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
			{Name: "CPUS", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "requests.cpu", Divisor: resource.MustParse("1")}}},
		},
		VolumeMounts: []v1.VolumeMount{
			{Name: "work", MountPath: "/work", ReadOnly: true},
			{Name: "config", MountPath: "/etc/web", SubPath: "web"},
		},
	}
	p.Spec.Volumes = []v1.Volume{
		{Name: "config", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/srv/config", Type: ptr.To(v1.HostPathDirectory)}}},
		{Name: "work", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("1Gi"))}}},
	}
	p.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists}}
	p.Status.HostIP = "192.168.1.10"
	p.Status.PodIP = "10.88.0.5"
	p.Status.PodIPs = []v1.PodIP{{IP: "10.88.0.5"}, {IP: "fd00::5"}}
	p.Status.QOSClass = v1.PodQOSBurstable
	p.Status.Conditions = []v1.PodCondition{
		{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue},
		{Type: v1.PodInitialized, Status: v1.ConditionTrue},
		{Type: v1.PodReady, Status: v1.ConditionFalse},
		{Type: v1.ContainersReady, Status: v1.ConditionFalse},
		{Type: v1.PodScheduled, Status: v1.ConditionTrue},
	}
	p.Status.InitContainerStatuses = []v1.ContainerStatus{{
		Name: "setup", ContainerID: "containerd://1111", Image: "docker.io/library/busybox:1.36", ImageID: "sha256:aaaa",
		State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: "Completed", StartedAt: *ago(5 * time.Minute), FinishedAt: *ago(5 * time.Minute)}},
		Ready: true,
	}}
	app := status("app", running(), false, 2)
	app.ContainerID, app.ImageID = "containerd://2222", "sha256:bbbb"
	app.LastTerminationState.Terminated = &v1.ContainerStateTerminated{Reason: "Error", ExitCode: 137, Signal: 9, Message: "killed",
		StartedAt: *ago(3 * time.Minute), FinishedAt: *ago(2 * time.Minute)}
	p.Status.ContainerStatuses = []v1.ContainerStatus{app}
	return p
}

func invalidManifestPod() *v1.Pod {
	p := pod()
	p.Name = "api"
	p.Status = v1.PodStatus{Phase: v1.PodFailed, Reason: "InvalidManifest",
		Message: "/etc/berth/manifests/api.yaml:7: spec.containers[0].image: Required value"}
	p.Annotations = map[string]string{"berth.dev/manifest-path": "/etc/berth/manifests/api.yaml", "kubernetes.io/config.source": "file"}
	return p
}

// waitingPod has a container that cannot start and one not created yet.
func waitingPod() *v1.Pod {
	p := pod("app", "sidecar")
	p.Status.Phase = v1.PodPending
	p.Spec.Containers[0].Image = "registry.invalid/app:v1"
	p.Spec.Containers[0].StartupProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromString("http")}},
		TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 30}
	p.Spec.Containers[1].Image = "busybox"
	p.Spec.Containers[1].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9000, Service: ptr.To("")}},
		TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}
	cs := status("app", v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ImagePullBackOff",
		Message: `Back-off pulling image "registry.invalid/app:v1"`}}, false, 0)
	cs.Image = "registry.invalid/app:v1"
	p.Status.ContainerStatuses = []v1.ContainerStatus{cs}
	return p
}

func terminatingPod() *v1.Pod {
	p := pod("app")
	p.DeletionTimestamp = ago(20 * time.Second)
	p.DeletionGracePeriodSeconds = ptr.To[int64](30)
	p.Spec.Containers[0].Image = "busybox"
	p.Spec.Containers[0].Command = []string{"sleep", "3600"}
	p.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi")}
	p.Spec.Containers[0].Resources.Requests = p.Spec.Containers[0].Resources.Limits
	p.Spec.Tolerations = []v1.Toleration{
		{Key: "node.kubernetes.io/unreachable", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
		{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "edge", Effect: v1.TaintEffectNoSchedule},
	}
	p.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
	p.Status.ContainerStatuses = []v1.ContainerStatus{status("app", running(), true, 0)}
	return p
}

func TestDescribePod(t *testing.T) {
	fullEvents := []v1.Event{
		event(v1.EventTypeNormal, "Pulled", `Container image "127.0.0.1:5000/web:v2" already present on machine`, 3, 5*time.Minute, 2*time.Minute),
		event(v1.EventTypeWarning, "Unhealthy", "Liveness probe failed: HTTP probe failed with statuscode: 500", 6, 4*time.Minute, 90*time.Second),
		event(v1.EventTypeNormal, "Killing", "Container app failed liveness probe, will be restarted", 1, 3*time.Minute, 3*time.Minute),
	}
	tests := []struct {
		name   string
		pod    *v1.Pod
		events []v1.Event
		want   string
	}{
		{name: "everything", pod: fullPod(), events: fullEvents, want: wantFull},
		{name: "invalid manifest", pod: invalidManifestPod(), want: wantInvalidManifest},
		{name: "waiting", pod: waitingPod(), events: []v1.Event{
			event(v1.EventTypeWarning, "Failed", "Error: ImagePullBackOff\n", 4, 3*time.Minute, 10*time.Second),
			event(v1.EventTypeNormal, "Pulling", "Pulling image \"registry.invalid/app:v1\"", 1, 3*time.Minute, 3*time.Minute),
		}, want: wantWaiting},
		{name: "terminating", pod: terminatingPod(), want: wantTerminating},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := describePod(tt.pod, admissionRecord{}, tt.events, now)
			if got != tt.want {
				t.Errorf("got\n%s\nwant\n%s\ndiff:\n%s", got, tt.want, lineDiff(got, tt.want))
			}
		})
	}
}

// lineDiff shows the first line that differs, with its neighbours.
func lineDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d:\n got %q\nwant %q", i+1, gl, wl)
		}
	}
	return "(none)"
}

// The expected descriptions below are kubectl's layout; some lines end in
// spaces (kubectl's condition cells, empty values), which matter.

const wantFull = `Name:                 web
Namespace:            default
Priority:             2000001000
Priority Class Name:  system-node-critical
Node:                 node-1/192.168.1.10
Start Time:           Wed, 01 May 2024 11:59:55 +0000
Labels:               app=web
                      tier=frontend
Annotations:          berth.dev/pod-cgroup: /kubepods/burstable/poduid-web
                      example.com/long:
                        line one
                        line two
                      kubernetes.io/config.source: file
Status:               Running
IP:                   10.88.0.5
IPs:
  IP:  10.88.0.5
  IP:  fd00::5
Init Containers:
  setup:
    Container ID:  containerd://1111
    Image:         busybox:1.36
    Image ID:      sha256:aaaa
    Port:          <none>
    Host Port:     <none>
    Command:
      sh
      -c
      echo ready > /work/flag
    State:          Terminated
      Reason:       Completed
      Exit Code:    0
      Started:      Wed, 01 May 2024 11:55:00 +0000
      Finished:     Wed, 01 May 2024 11:55:00 +0000
    Ready:          True
    Restart Count:  0
    Environment:    <none>
    Mounts:
      /work from work (rw)
Containers:
  app:
    Container ID:  containerd://2222
    Image:         127.0.0.1:5000/web:v2
    Image ID:      sha256:bbbb
    Ports:         8080/TCP, 9090/TCP
    Host Ports:    0/TCP, 19090/TCP
    Args:
      --port=8080
      --motd=hello
      world
    State:          Running
      Started:      Wed, 01 May 2024 11:59:00 +0000
    Last State:     Terminated
      Reason:       Error
      Message:      killed
      Exit Code:    137
      Signal:       9
      Started:      Wed, 01 May 2024 11:57:00 +0000
      Finished:     Wed, 01 May 2024 11:58:00 +0000
    Ready:          False
    Restart Count:  2
    Limits:
      cpu:     500m
      memory:  128Mi
    Requests:
      cpu:      250m
      memory:   64Mi
    Liveness:   http-get http://:8080/healthz delay=0s timeout=1s period=10s #success=1 #failure=3
    Readiness:  exec [cat /tmp/ready] delay=5s timeout=1s period=5s #success=1 #failure=3
    Environment:
      MODE:      production
      POD_NAME:  web (v1:metadata.name)
      TIER:      frontend (v1:metadata.labels['tier'])
      MEM_MB:    128 (limits.memory)
      CPUS:      1 (requests.cpu)
    Mounts:
      /etc/web from config (rw,path="web")
      /work from work (ro)
Conditions:
  Type                        Status
  PodReadyToStartContainers   True 
  Initialized                 True 
  Ready                       False 
  ContainersReady             False 
  PodScheduled                True 
Volumes:
  config:
    Type:          HostPath (bare host directory volume)
    Path:          /srv/config
    HostPathType:  Directory
  work:
    Type:        EmptyDir (a temporary directory that shares a pod's lifetime)
    Medium:      
    SizeLimit:   1Gi
QoS Class:       Burstable
Node-Selectors:  <none>
Tolerations:     op=Exists
Events:
  Type     Reason     Age               From   Message
  ----     ------     ----              ----   -------
  Normal   Killing    3m                berth  Container app failed liveness probe, will be restarted
  Normal   Pulled     2m (x3 over 5m)   berth  Container image "127.0.0.1:5000/web:v2" already present on machine
  Warning  Unhealthy  90s (x6 over 4m)  berth  Liveness probe failed: HTTP probe failed with statuscode: 500
`

const wantInvalidManifest = `Name:         api
Namespace:    default
Node:         <none>
Labels:       <none>
Annotations:  berth.dev/manifest-path: /etc/berth/manifests/api.yaml
              kubernetes.io/config.source: file
Status:       Failed
Reason:       InvalidManifest
Message:      /etc/berth/manifests/api.yaml:7: spec.containers[0].image: Required value
IP:           
IPs:          <none>
Events:       <none>
`

const wantWaiting = `Name:         web
Namespace:    default
Node:         <none>
Start Time:   Wed, 01 May 2024 11:59:55 +0000
Labels:       <none>
Annotations:  <none>
Status:       Pending
IP:           
IPs:          <none>
Containers:
  app:
    Container ID:   
    Image:          registry.invalid/app:v1
    Image ID:       
    Port:           <none>
    Host Port:      <none>
    State:          Waiting
      Reason:       ImagePullBackOff
      Message:      Back-off pulling image "registry.invalid/app:v1"
    Ready:          False
    Restart Count:  0
    Startup:        tcp-socket :http delay=0s timeout=1s period=10s #success=1 #failure=30
    Environment:    <none>
    Mounts:         <none>
  sidecar:
    Image:        busybox
    Port:         <none>
    Host Port:    <none>
    Liveness:     grpc <pod>:9000  delay=0s timeout=1s period=10s #success=1 #failure=3
    Environment:  <none>
    Mounts:       <none>
Volumes:          <none>
QoS Class:        BestEffort
Node-Selectors:   <none>
Tolerations:      <none>
Events:
  Type     Reason   Age               From   Message
  ----     ------   ----              ----   -------
  Normal   Pulling  3m                berth  Pulling image "registry.invalid/app:v1"
  Warning  Failed   10s (x4 over 3m)  berth  Error: ImagePullBackOff
`

const wantTerminating = `Name:                      web
Namespace:                 default
Node:                      <none>
Start Time:                Wed, 01 May 2024 11:59:55 +0000
Labels:                    <none>
Annotations:               <none>
Status:                    Terminating (lasts 20s)
Termination Grace Period:  30s
IP:                        
IPs:                       <none>
Containers:
  app:
    Container ID:  
    Image:         busybox
    Image ID:      
    Port:          <none>
    Host Port:     <none>
    Command:
      sleep
      3600
    State:          Running
      Started:      Wed, 01 May 2024 11:59:00 +0000
    Ready:          True
    Restart Count:  0
    Limits:
      cpu:     1
      memory:  1Gi
    Requests:
      cpu:        1
      memory:     1Gi
    Environment:  <none>
    Mounts:       <none>
Volumes:          <none>
QoS Class:        Guaranteed
Node-Selectors:   kubernetes.io/os=linux
Tolerations:      dedicated=edge:NoSchedule
                  node.kubernetes.io/unreachable:NoExecute op=Exists for 300s
Events:           <none>
`

func TestDescribeProbe(t *testing.T) {
	attrs := "delay=0s timeout=1s period=10s #success=1 #failure=3"
	probe := func(h v1.ProbeHandler) *v1.Probe {
		return &v1.Probe{ProbeHandler: h, TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}
	}
	tests := []struct {
		name  string
		probe *v1.Probe
		want  string
	}{
		{"http", probe(v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080), Scheme: v1.URISchemeHTTP}}),
			"http-get http://:8080/healthz " + attrs},
		{"https with host and named port", probe(v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Host: "10.0.0.1", Path: "/ready", Port: intstr.FromString("web"), Scheme: v1.URISchemeHTTPS}}),
			"http-get https://10.0.0.1:web/ready " + attrs},
		{"ipv6 host", probe(v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Host: "::1", Port: intstr.FromInt32(80), Scheme: v1.URISchemeHTTP}}),
			"http-get http://[::1]:80 " + attrs},
		{"tcp", probe(v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(5432)}}), "tcp-socket :5432 " + attrs},
		{"grpc with service", probe(v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9000, Service: ptr.To("liveness")}}), "grpc <pod>:9000 liveness " + attrs},
		{"grpc without service", probe(v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9000}}), "grpc <pod>:9000  " + attrs},
		{"exec", probe(v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"pg_isready", "-q"}}}), "exec [pg_isready -q] " + attrs},
		{"none", probe(v1.ProbeHandler{}), "unknown " + attrs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := describeProbe(tt.probe); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestDescribeTarget(t *testing.T) {
	tests := []struct {
		args    []string
		want    string
		wantErr string
	}{
		{args: []string{"web"}, want: "web"},
		{args: []string{"pod", "web"}, want: "web"},
		{args: []string{"pods", "web"}, want: "web"},
		{args: []string{"po", "web"}, want: "web"},
		{args: []string{"pod/web"}, want: "web"},
		{args: []string{"pods"}, want: ""},
		{args: []string{"pod"}, want: ""},
		{args: []string{"node", "n1"}, wantErr: `only pods can be described: want "pod NAME", got "node n1"`},
		{args: []string{"deployment/web"}, wantErr: `want pod/NAME, got "deployment/web"`},
		{args: []string{"pod/"}, wantErr: `want pod/NAME, got "pod/"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got, err := describeTarget(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestDescribeDetails(t *testing.T) {
	long := strings.Repeat("x", 200)
	tests := []struct {
		name string
		pod  func() *v1.Pod
		want []string // lines expected in the description
	}{
		{
			name: "terminal escapes are defused",
			pod: func() *v1.Pod {
				p := invalidManifestPod()
				p.Status.Message = "bad\x1b[2Jmanifest\r"
				return p
			},
			want: []string{`Message:      bad^[[2Jmanifest\r`},
		},
		{
			name: "a message of several lines stays aligned",
			pod: func() *v1.Pod {
				p := invalidManifestPod()
				p.Status.Message = "first\nsecond\n"
				return p
			},
			want: []string{"Message:      first", "              second"},
		},
		{
			name: "long annotations are folded and cut",
			pod: func() *v1.Pod {
				p := invalidManifestPod()
				p.Annotations = map[string]string{"example.com/long": long}
				return p
			},
			want: []string{"Annotations:  example.com/long:", "                " + long[:138] + "..."},
		},
		{
			name: "unset cpu and memory limits read as node allocatable",
			pod: func() *v1.Pod {
				p := pod("app")
				p.Spec.Containers[0].Env = []v1.EnvVar{
					{Name: "CPU_LIMIT", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: resource.MustParse("1m")}}},
					{Name: "NODE", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"}}},
					{Name: "DB_PASSWORD", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
						LocalObjectReference: v1.LocalObjectReference{Name: "db"}, Key: "password"}}},
				}
				p.Spec.NodeName = "node-1"
				return p
			},
			want: []string{
				"      CPU_LIMIT:    node allocatable (limits.cpu)",
				"      NODE:         node-1 (v1:spec.nodeName)",
				"      DB_PASSWORD:  <set to the key 'password' in secret 'db'>  Optional: false",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := describePod(tt.pod(), admissionRecord{}, nil, now)
			lines := strings.Split(got, "\n")
			for _, want := range tt.want {
				if !slices.Contains(lines, want) {
					t.Errorf("no line %q in\n%s", want, got)
				}
			}
		})
	}
}

func TestDescribeGonePod(t *testing.T) {
	got := describeGonePod("default", "web", []v1.Event{
		event(v1.EventTypeNormal, "Killing", "Stopping container app", 1, time.Minute, time.Minute),
	}, now)
	want := `Pod 'web': error 'pod default/web not found', but found events.
Events:
  Type    Reason   Age   From   Message
  ----    ------   ----  ----   -------
  Normal  Killing  60s   berth  Stopping container app
`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestDescribeCommand runs describe against a real local API.
func TestDescribeCommand(t *testing.T) {
	web := fullPod()
	api := invalidManifestPod()
	dns := pod("coredns")
	dns.Namespace, dns.Name = "kube-system", "coredns"
	src := &apiSource{
		pods: []v1.Pod{*web, *api, *dns},
		events: map[string][]v1.Event{
			"default/web":  {event(v1.EventTypeNormal, "Started", "Started container app", 1, time.Minute, time.Minute)},
			"default/gone": {event(v1.EventTypeNormal, "Killing", "Stopping container app", 1, time.Minute, time.Minute)},
		},
	}
	hs := httptest.NewServer(server.New("", src, nil, slog.New(slog.DiscardHandler)).Handler())
	t.Cleanup(hs.Close)
	client := newAPIClient(hs.URL)

	tests := []struct {
		name      string
		namespace string
		pod       string
		want      []string // substrings of the output, in order
		wantErr   string
		wantNone  string // on stderr
	}{
		{name: "one pod with its events", namespace: "default", pod: "web",
			want: []string{"Name:                 web\n", "Events:\n", "Normal  Started  60s   berth  Started container app\n"}},
		{name: "invalid manifest", namespace: "default", pod: "api",
			want: []string{"Reason:       InvalidManifest\n", "Message:      /etc/berth/manifests/api.yaml:7: spec.containers[0].image: Required value\n", "Events:       <none>\n"}},
		{name: "gone pod with events", namespace: "default", pod: "gone",
			want: []string{"Pod 'gone': error 'pod default/gone not found', but found events.\n", "Stopping container app"}},
		{name: "unknown pod", namespace: "default", pod: "nope", wantErr: "pod default/nope not found"},
		{name: "wrong namespace", namespace: "kube-system", pod: "web", wantErr: "pod kube-system/web not found"},
		{name: "all pods in the namespace", namespace: "default",
			want: []string{"Name:         api\n", "\n\nName:                 web\n"}},
		{name: "no pods in the namespace", namespace: "empty", wantNone: "No resources found in empty namespace.\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut strings.Builder
			err := describe(context.Background(), &out, &errOut, client, tt.namespace, tt.pod, now, palette{})
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			rest := out.String()
			for _, want := range tt.want {
				i := strings.Index(rest, want)
				if i < 0 {
					t.Fatalf("%q missing (or out of order) in\n%s", want, out.String())
				}
				rest = rest[i+len(want):]
			}
			if errOut.String() != tt.wantNone {
				t.Errorf("stderr %q, want %q", errOut.String(), tt.wantNone)
			}
		})
	}
}
