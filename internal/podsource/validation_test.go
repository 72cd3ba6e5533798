package podsource

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// validPod is a static pod that uses most of what berth accepts.
func validPod() *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod", Labels: map[string]string{"app": "web"}},
		Spec: v1.PodSpec{
			Volumes: []v1.Volume{
				{Name: "cache"},
				{Name: "logs", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/var/log/web", Type: ptr.To(v1.HostPathDirectoryOrCreate)}}},
			},
			InitContainers: []v1.Container{
				{Name: "migrate", Image: "registry.local/web:1.2", Command: []string{"migrate"}},
				{
					Name: "proxy", Image: "registry.local/proxy:2", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways),
					ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(15000)}}},
				},
			},
			Containers: []v1.Container{{
				Name:  "web",
				Image: "registry.local/web:1.2",
				Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080, HostPort: 80}, {Name: "metrics", ContainerPort: 9090}},
				Env: []v1.EnvVar{
					{Name: "MODE", Value: "prod"},
					{Name: "POD", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					{Name: "APP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
					{Name: "MEM_MB", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "web", Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
				},
				Resources: v1.ResourceRequirements{
					Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("512Mi"), "example.com/gpu": resource.MustParse("1")},
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")},
				},
				VolumeMounts: []v1.VolumeMount{{Name: "cache", MountPath: "/cache"}, {Name: "logs", MountPath: "/logs", SubPath: "web"}},
				LivenessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
					Port: intstr.FromString("http"), HTTPHeaders: []v1.HTTPHeader{{Name: "X-Probe", Value: "1"}},
				}}},
				StartupProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}},
				Lifecycle:    &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 5}}},
			}},
			DNSConfig:         &v1.PodDNSConfig{Searches: []string{"svc.example."}},
			HostAliases:       []v1.HostAlias{{IP: "10.0.0.1", Hostnames: []string{"db.local"}}},
			PriorityClassName: SystemNodeCritical,
		},
	}
	SetDefaults(pod)
	applyStaticIdentity(pod, "0123456789abcdef0123456789abcdef", "node-1")
	return pod
}

func TestValidateAcceptsValidPod(t *testing.T) {
	if errs := Validate(validPod()); len(errs) > 0 {
		t.Fatalf("Validate(validPod()) = %v", errs)
	}
}

func TestValidate(t *testing.T) {
	web := func(p *v1.Pod) *v1.Container { return &p.Spec.Containers[0] }
	for _, tc := range []struct {
		name   string
		mutate func(*v1.Pod)
		want   []string // "<field>: <type>"
	}{
		// Metadata.
		{"bad name", func(p *v1.Pod) { p.Name = "Web_1-node-1" }, []string{"metadata.name: Invalid value"}},
		{"no name", func(p *v1.Pod) { p.Name = "" }, []string{"metadata.name: Required value"}},
		{"bad namespace", func(p *v1.Pod) { p.Namespace = "a.b" }, []string{"metadata.namespace: Invalid value"}},
		{"bad labels", func(p *v1.Pod) { p.Labels = map[string]string{"b/": "x", "a": "-"} }, []string{"metadata.labels: Invalid value", "metadata.labels: Invalid value", "metadata.labels: Invalid value"}},

		// Containers.
		{"no containers", func(p *v1.Pod) { p.Spec.Containers = nil }, []string{"spec.containers: Required value"}},
		{"container name", func(p *v1.Pod) { web(p).Name = "Web" }, []string{"spec.containers[0].name: Invalid value", "spec.containers[0].env[3].valueFrom.resourceFieldRef.containerName: Not found"}},
		{"container name empty", func(p *v1.Pod) { p.Spec.InitContainers[0].Name = "" }, []string{"spec.initContainers[0].name: Required value"}},
		{"duplicate across init and app", func(p *v1.Pod) { web(p).Name = "migrate"; web(p).Env = nil }, []string{"spec.containers[0].name: Duplicate value"}},
		{"duplicate app", func(p *v1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "web", Image: "x", ImagePullPolicy: "Always", TerminationMessagePolicy: "File"})
		}, []string{"spec.containers[1].name: Duplicate value"}},
		{"no image", func(p *v1.Pod) { web(p).Image = "" }, []string{"spec.containers[0].image: Required value"}},
		{"image whitespace", func(p *v1.Pod) { web(p).Image = " busybox" }, []string{"spec.containers[0].image: Invalid value"}},
		{"pull policy", func(p *v1.Pod) { web(p).ImagePullPolicy = "Sometimes" }, []string{"spec.containers[0].imagePullPolicy: Unsupported value"}},
		{"termination message policy", func(p *v1.Pod) { p.Spec.InitContainers[0].TerminationMessagePolicy = "" }, []string{"spec.initContainers[0].terminationMessagePolicy: Required value"}},
		// ContainerRestartRules (on since 1.35), as the API server validates them.
		{"container restart policy", func(p *v1.Pod) { web(p).RestartPolicy = ptr.To(v1.ContainerRestartPolicyNever) }, nil},
		{"container restart policy unknown", func(p *v1.Pod) { web(p).RestartPolicy = ptr.To(v1.ContainerRestartPolicy("Sometimes")) }, []string{"spec.containers[0].restartPolicy: Unsupported value"}},
		{"container restart rules", func(p *v1.Pod) {
			web(p).RestartPolicy = ptr.To(v1.ContainerRestartPolicyNever)
			web(p).RestartPolicyRules = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart,
				ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
		}, nil},
		{"restart rules without a policy", func(p *v1.Pod) {
			web(p).RestartPolicyRules = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart,
				ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
		}, []string{"spec.containers[0].restartPolicy: Required value"}},
		{"restart rule action, operator and exit codes", func(p *v1.Pod) {
			web(p).RestartPolicy = ptr.To(v1.ContainerRestartPolicyOnFailure)
			web(p).RestartPolicyRules = []v1.ContainerRestartRule{
				{Action: "RestartAllContainers", ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: "Between", Values: make([]int32, 256)}},
				{Action: v1.ContainerRestartRuleActionRestart},
			}
		}, []string{"spec.containers[0].restartPolicyRules[0].action: Unsupported value",
			"spec.containers[0].restartPolicyRules[0].exitCodes.operator: Unsupported value",
			"spec.containers[0].restartPolicyRules[0].exitCodes.values: Too many",
			"spec.containers[0].restartPolicyRules[1].exitCodes: Required value"}},
		{"too many restart rules", func(p *v1.Pod) {
			web(p).RestartPolicy = ptr.To(v1.ContainerRestartPolicyNever)
			for range 21 {
				web(p).RestartPolicyRules = append(web(p).RestartPolicyRules, v1.ContainerRestartRule{Action: v1.ContainerRestartRuleActionRestart,
					ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpNotIn}})
			}
		}, []string{"spec.containers[0].restartPolicyRules: Too many"}},
		{"init restart policy", func(p *v1.Pod) { p.Spec.InitContainers[0].RestartPolicy = ptr.To(v1.ContainerRestartPolicy("Never")) }, nil},
		{"init restart policy unknown", func(p *v1.Pod) {
			p.Spec.InitContainers[0].RestartPolicy = ptr.To(v1.ContainerRestartPolicy("Sometimes"))
		}, []string{"spec.initContainers[0].restartPolicy: Unsupported value"}},
		{"sidecar restart rules", func(p *v1.Pod) {
			p.Spec.InitContainers[0].RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
			p.Spec.InitContainers[0].RestartPolicyRules = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart,
				ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{1}}}}
		}, []string{"spec.initContainers[0].restartPolicyRules: Forbidden"}},
		{"probe on init container", func(p *v1.Pod) {
			p.Spec.InitContainers[0].LivenessProbe = web(p).StartupProbe
			p.Spec.InitContainers[0].Lifecycle = web(p).Lifecycle
		}, []string{"spec.initContainers[0].livenessProbe: Forbidden", "spec.initContainers[0].lifecycle: Forbidden"}},

		// Ports.
		{"container port 0", func(p *v1.Pod) { web(p).Ports[1].ContainerPort = 0 }, []string{"spec.containers[0].ports[1].containerPort: Required value"}},
		{"container port too big", func(p *v1.Pod) { web(p).Ports[1].ContainerPort = 70000 }, []string{"spec.containers[0].ports[1].containerPort: Invalid value"}},
		{"host port too big", func(p *v1.Pod) { web(p).Ports[0].HostPort = 65536 }, []string{"spec.containers[0].ports[0].hostPort: Invalid value"}},
		{"protocol", func(p *v1.Pod) { web(p).Ports[0].Protocol = "ICMP" }, []string{"spec.containers[0].ports[0].protocol: Unsupported value"}},
		{"port name", func(p *v1.Pod) { web(p).Ports[1].Name = "metrics_port" }, []string{"spec.containers[0].ports[1].name: Invalid value"}},
		{"port name duplicate", func(p *v1.Pod) { web(p).Ports[1].Name = "http" }, []string{"spec.containers[0].ports[1].name: Duplicate value"}},
		{"host network host port", func(p *v1.Pod) { p.Spec.HostNetwork = true; web(p).Ports[1].HostPort = 9090 }, []string{"spec.containers[0].ports[0].hostPort: Invalid value"}},
		{"host port conflict", func(p *v1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "two", Image: "x", ImagePullPolicy: "Always", TerminationMessagePolicy: "File",
				Ports: []v1.ContainerPort{{ContainerPort: 8081, HostPort: 80, Protocol: "TCP"}}})
		}, []string{"spec.containers[1].ports[0].hostPort: Duplicate value"}},
		{"host port conflict in one init container", func(p *v1.Pod) {
			p.Spec.InitContainers[0].Ports = []v1.ContainerPort{{ContainerPort: 1, HostPort: 80, Protocol: "TCP"}, {ContainerPort: 2, HostPort: 80, Protocol: "TCP"}}
		}, []string{"spec.initContainers[0].ports[1].hostPort: Duplicate value"}},
		{"an init container may reuse a host port", func(p *v1.Pod) {
			p.Spec.InitContainers[0].Ports = []v1.ContainerPort{{ContainerPort: 1, HostPort: 80, Protocol: "TCP"}}
		}, nil},
		{"a sidecar runs beside the app containers", func(p *v1.Pod) {
			p.Spec.InitContainers[1].Ports = []v1.ContainerPort{{ContainerPort: 1, HostPort: 80, Protocol: "TCP"}}
		}, []string{"spec.containers[0].ports[0].hostPort: Duplicate value"}},

		// Environment.
		{"env name", func(p *v1.Pod) { web(p).Env[0].Name = "A=B" }, []string{"spec.containers[0].env[0].name: Invalid value"}},
		{"env name empty", func(p *v1.Pod) { web(p).Env[0].Name = "" }, []string{"spec.containers[0].env[0].name: Required value"}},
		{"env value and valueFrom", func(p *v1.Pod) { web(p).Env[1].Value = "x" }, []string{"spec.containers[0].env[1].valueFrom: Invalid value"}},
		{"env two sources", func(p *v1.Pod) { web(p).Env[1].ValueFrom.ResourceFieldRef = web(p).Env[3].ValueFrom.ResourceFieldRef }, []string{"spec.containers[0].env[1].valueFrom: Invalid value"}},
		{"env no source", func(p *v1.Pod) { web(p).Env[1].ValueFrom = &v1.EnvVarSource{} }, []string{"spec.containers[0].env[1].valueFrom: Invalid value"}},
		{"env field path", func(p *v1.Pod) { web(p).Env[1].ValueFrom.FieldRef.FieldPath = "spec.containers" }, []string{"spec.containers[0].env[1].valueFrom.fieldRef.fieldPath: Unsupported value"}},
		{"env field api version", func(p *v1.Pod) { web(p).Env[1].ValueFrom.FieldRef.APIVersion = "v2" }, []string{"spec.containers[0].env[1].valueFrom.fieldRef.apiVersion: Unsupported value"}},
		{"env label key", func(p *v1.Pod) { web(p).Env[2].ValueFrom.FieldRef.FieldPath = "metadata.labels['a b']" }, []string{"spec.containers[0].env[2].valueFrom.fieldRef.fieldPath: Invalid value"}},
		{"env resource", func(p *v1.Pod) { web(p).Env[3].ValueFrom.ResourceFieldRef.Resource = "limits.gpu" }, []string{"spec.containers[0].env[3].valueFrom.resourceFieldRef.resource: Unsupported value"}},
		{"env divisor", func(p *v1.Pod) { web(p).Env[3].ValueFrom.ResourceFieldRef.Divisor = resource.MustParse("3") }, []string{"spec.containers[0].env[3].valueFrom.resourceFieldRef.divisor: Invalid value"}},
		{"env secret", func(p *v1.Pod) {
			web(p).Env[1].ValueFrom = &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{Key: "k"}}
			web(p).Env[2].ValueFrom = &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{Key: "k"}}
		}, []string{"spec.containers[0].env[1].valueFrom.secretKeyRef: Forbidden", "spec.containers[0].env[2].valueFrom.configMapKeyRef: Forbidden"}},
		{"envFrom", func(p *v1.Pod) {
			web(p).EnvFrom = []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{}}, {SecretRef: &v1.SecretEnvSource{}}}
		}, []string{"spec.containers[0].envFrom[0].configMapRef: Forbidden", "spec.containers[0].envFrom[1].secretRef: Forbidden"}},

		// Resources.
		{"request above limit", func(p *v1.Pod) { web(p).Resources.Requests[v1.ResourceCPU] = resource.MustParse("3") }, []string{"spec.containers[0].resources.requests[cpu]: Invalid value"}},
		{"negative quantity", func(p *v1.Pod) {
			web(p).Resources.Limits[v1.ResourceMemory] = resource.MustParse("-1")
			web(p).Resources.Requests[v1.ResourceMemory] = resource.MustParse("-1")
		}, []string{"spec.containers[0].resources.limits[memory]: Invalid value", "spec.containers[0].resources.requests[memory]: Invalid value"}},
		{"extended resource below limit", func(p *v1.Pod) { web(p).Resources.Requests["example.com/gpu"] = resource.MustParse("0") }, []string{"spec.containers[0].resources.requests[example.com/gpu]: Invalid value"}},
		{"extended resource fraction", func(p *v1.Pod) {
			web(p).Resources.Limits["example.com/gpu"] = resource.MustParse("500m")
			web(p).Resources.Requests["example.com/gpu"] = resource.MustParse("500m")
		}, []string{"spec.containers[0].resources.limits[example.com/gpu]: Invalid value", "spec.containers[0].resources.requests[example.com/gpu]: Invalid value"}},
		{"extended resource without limit", func(p *v1.Pod) { delete(web(p).Resources.Limits, "example.com/gpu") }, []string{"spec.containers[0].resources.limits: Required value"}},
		{"unknown resource", func(p *v1.Pod) { web(p).Resources.Limits["gpu"] = resource.MustParse("1") }, []string{"spec.containers[0].resources.limits[gpu]: Invalid value"}},
		{"resource claims", func(p *v1.Pod) { web(p).Resources.Claims = []v1.ResourceClaim{{Name: "c"}} }, []string{"spec.containers[0].resources.claims: Forbidden"}},

		// Volumes and mounts.
		{"volume name", func(p *v1.Pod) { p.Spec.Volumes[0].Name = "Cache"; web(p).VolumeMounts[0].Name = "Cache" }, []string{"spec.volumes[0].name: Invalid value"}},
		{"volume duplicate", func(p *v1.Pod) { p.Spec.Volumes[1].Name = "cache" }, []string{"spec.volumes[1].name: Duplicate value", "spec.containers[0].volumeMounts[1].name: Not found"}},
		{"volume two sources", func(p *v1.Pod) { p.Spec.Volumes[1].EmptyDir = &v1.EmptyDirVolumeSource{} }, []string{"spec.volumes[1].emptyDir: Forbidden"}},
		{"volume configMap", func(p *v1.Pod) {
			p.Spec.Volumes[0].VolumeSource = v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}
		}, []string{"spec.volumes[0].configMap: Forbidden"}},
		{"volume secret", func(p *v1.Pod) { p.Spec.Volumes[0].VolumeSource = v1.VolumeSource{Secret: &v1.SecretVolumeSource{}} }, []string{"spec.volumes[0].secret: Forbidden"}},
		{"volume projected", func(p *v1.Pod) {
			p.Spec.Volumes[0].VolumeSource = v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{}}
		}, []string{"spec.volumes[0].projected: Forbidden"}},
		{"volume pvc", func(p *v1.Pod) {
			p.Spec.Volumes[0].VolumeSource = v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}
		}, []string{"spec.volumes[0].persistentVolumeClaim: Forbidden"}},
		{"volume nfs", func(p *v1.Pod) { p.Spec.Volumes[0].VolumeSource = v1.VolumeSource{NFS: &v1.NFSVolumeSource{}} }, []string{"spec.volumes[0].nfs: Forbidden"}},
		{"volume downwardAPI", func(p *v1.Pod) {
			p.Spec.Volumes[0].VolumeSource = v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{}}
		}, []string{"spec.volumes[0].downwardAPI: Forbidden"}},
		{"volume image", func(p *v1.Pod) {
			p.Spec.Volumes[0].VolumeSource = v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "tools:1", PullPolicy: v1.PullIfNotPresent}}
		}, nil},
		{"volume image without reference", func(p *v1.Pod) {
			p.Spec.Volumes[0].VolumeSource = v1.VolumeSource{Image: &v1.ImageVolumeSource{PullPolicy: v1.PullNever}}
		}, []string{"spec.volumes[0].image.reference: Required value"}},
		{"volume image pull policy", func(p *v1.Pod) {
			p.Spec.Volumes[0].VolumeSource = v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "tools:1", PullPolicy: "Sometimes"}}
		}, []string{"spec.volumes[0].image.pullPolicy: Unsupported value"}},
		{"volume without source", func(p *v1.Pod) { p.Spec.Volumes[0].VolumeSource = v1.VolumeSource{} }, []string{"spec.volumes[0]: Required value"}},
		{"hostPath relative", func(p *v1.Pod) { p.Spec.Volumes[1].HostPath.Path = "var/log" }, []string{"spec.volumes[1].hostPath.path: Invalid value"}},
		{"hostPath backsteps", func(p *v1.Pod) { p.Spec.Volumes[1].HostPath.Path = "/var/../etc" }, []string{"spec.volumes[1].hostPath.path: Invalid value"}},
		{"hostPath type", func(p *v1.Pod) { p.Spec.Volumes[1].HostPath.Type = ptr.To(v1.HostPathType("Dir")) }, []string{"spec.volumes[1].hostPath.type: Unsupported value"}},
		{"emptyDir medium", func(p *v1.Pod) { p.Spec.Volumes[0].EmptyDir.Medium = "Disk" }, []string{"spec.volumes[0].emptyDir.medium: Unsupported value"}},
		{"mount of no volume", func(p *v1.Pod) { web(p).VolumeMounts[0].Name = "nope" }, []string{"spec.containers[0].volumeMounts[0].name: Not found"}},
		{"mount path relative", func(p *v1.Pod) { web(p).VolumeMounts[0].MountPath = "cache" }, []string{"spec.containers[0].volumeMounts[0].mountPath: Invalid value"}},
		{"mount path duplicate", func(p *v1.Pod) { web(p).VolumeMounts[1].MountPath = "/cache/" }, []string{"spec.containers[0].volumeMounts[1].mountPath: Invalid value"}},
		{"sub path escapes", func(p *v1.Pod) { web(p).VolumeMounts[1].SubPath = "../etc" }, []string{"spec.containers[0].volumeMounts[1].subPath: Invalid value"}},
		{"sub path absolute", func(p *v1.Pod) { web(p).VolumeMounts[1].SubPath = "/etc" }, []string{"spec.containers[0].volumeMounts[1].subPath: Invalid value"}},
		{"bidirectional unprivileged", func(p *v1.Pod) { web(p).VolumeMounts[1].MountPropagation = ptr.To(v1.MountPropagationBidirectional) }, []string{"spec.containers[0].volumeMounts[1].mountPropagation: Forbidden"}},
		{"volume devices", func(p *v1.Pod) { web(p).VolumeDevices = []v1.VolumeDevice{{Name: "cache", DevicePath: "/dev/x"}} }, []string{"spec.containers[0].volumeDevices: Forbidden"}},

		// Probes and handlers.
		{"probe without handler", func(p *v1.Pod) { web(p).LivenessProbe.HTTPGet = nil }, []string{"spec.containers[0].livenessProbe: Required value"}},
		{"probe with two handlers", func(p *v1.Pod) { web(p).LivenessProbe.Exec = &v1.ExecAction{Command: []string{"x"}} }, []string{"spec.containers[0].livenessProbe.httpGet: Forbidden"}},
		{"liveness success threshold", func(p *v1.Pod) { web(p).LivenessProbe.SuccessThreshold = 2 }, []string{"spec.containers[0].livenessProbe.successThreshold: Invalid value"}},
		{"negative period", func(p *v1.Pod) { web(p).StartupProbe.PeriodSeconds = -1 }, []string{"spec.containers[0].startupProbe.periodSeconds: Invalid value"}},
		{"readiness grace period", func(p *v1.Pod) {
			p.Spec.InitContainers[1].ReadinessProbe.TerminationGracePeriodSeconds = ptr.To[int64](5)
		}, []string{"spec.initContainers[1].readinessProbe.terminationGracePeriodSeconds: Invalid value"}},
		{"exec without command", func(p *v1.Pod) { web(p).StartupProbe.Exec.Command = nil }, []string{"spec.containers[0].startupProbe.exec.command: Required value"}},
		{"http port name", func(p *v1.Pod) { web(p).LivenessProbe.HTTPGet.Port = intstr.FromString("no_such") }, []string{"spec.containers[0].livenessProbe.httpGet.port: Invalid value"}},
		{"http scheme", func(p *v1.Pod) { web(p).LivenessProbe.HTTPGet.Scheme = "FTP" }, []string{"spec.containers[0].livenessProbe.httpGet.scheme: Unsupported value"}},
		{"http header", func(p *v1.Pod) { web(p).LivenessProbe.HTTPGet.HTTPHeaders[0].Name = "X Probe" }, []string{"spec.containers[0].livenessProbe.httpGet.httpHeaders[0].name: Invalid value"}},
		{"grpc port", func(p *v1.Pod) {
			p.Spec.InitContainers[1].ReadinessProbe.ProbeHandler = v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 0, Service: ptr.To("")}}
		}, []string{"spec.initContainers[1].readinessProbe.grpc.port: Invalid value"}},
		{"lifecycle without handler", func(p *v1.Pod) { web(p).Lifecycle.PreStop.Sleep = nil }, []string{"spec.containers[0].lifecycle.preStop: Required value"}},
		{"sleep beyond grace", func(p *v1.Pod) { web(p).Lifecycle.PreStop.Sleep.Seconds = 31 }, []string{"spec.containers[0].lifecycle.preStop.sleep.seconds: Invalid value"}},

		// Pod spec.
		{"restart policy", func(p *v1.Pod) { p.Spec.RestartPolicy = "Sometimes" }, []string{"spec.restartPolicy: Unsupported value"}},
		{"dns policy", func(p *v1.Pod) { p.Spec.DNSPolicy = "Google" }, []string{"spec.dnsPolicy: Unsupported value"}},
		{"dns none without config", func(p *v1.Pod) { p.Spec.DNSPolicy = v1.DNSNone; p.Spec.DNSConfig = nil }, []string{"spec.dnsConfig: Required value"}},
		{"dns none without nameservers", func(p *v1.Pod) { p.Spec.DNSPolicy = v1.DNSNone }, []string{"spec.dnsConfig.nameservers: Required value"}},
		{"dns nameserver", func(p *v1.Pod) { p.Spec.DNSConfig.Nameservers = []string{"dns.google"} }, []string{"spec.dnsConfig.nameservers[0]: Invalid value"}},
		{"grace period", func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](-1) }, []string{
			"spec.containers[0].lifecycle.preStop.sleep.seconds: Invalid value", "spec.terminationGracePeriodSeconds: Invalid value"}},
		{"active deadline", func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](0) }, []string{"spec.activeDeadlineSeconds: Invalid value"}},
		{"host alias", func(p *v1.Pod) { p.Spec.HostAliases[0].IP = "10.0.0" }, []string{"spec.hostAliases[0].ip: Invalid value"}},
		{"hostname", func(p *v1.Pod) { p.Spec.Hostname = "web.local" }, []string{"spec.hostname: Invalid value"}},
		{"run as user", func(p *v1.Pod) { p.Spec.SecurityContext.RunAsUser = ptr.To[int64](-1) }, []string{"spec.securityContext.runAsUser: Invalid value"}},
		{"share pid with host", func(p *v1.Pod) { p.Spec.HostPID = true; p.Spec.ShareProcessNamespace = ptr.To(true) }, []string{"spec.shareProcessNamespace: Invalid value"}},
		{"unknown priority class", func(p *v1.Pod) { p.Spec.PriorityClassName = "high" }, []string{"spec.priorityClassName: Forbidden"}},
		{"priority differs from class", func(p *v1.Pod) { p.Spec.Priority = ptr.To[int32](5) }, []string{"spec.priority: Forbidden"}},
		{"image pull secrets", func(p *v1.Pod) { p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "s"}} }, []string{"spec.imagePullSecrets: Forbidden"}},
		{"runtime class", func(p *v1.Pod) { p.Spec.RuntimeClassName = ptr.To("kata") }, []string{"spec.runtimeClassName: Forbidden"}},
		{"ephemeral containers", func(p *v1.Pod) {
			p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug"}}}
		}, []string{"spec.ephemeralContainers: Forbidden"}},
		{"node name", func(p *v1.Pod) { p.Spec.NodeName = "Node_1" }, []string{"spec.nodeName: Invalid value"}},
		{"fs group", func(p *v1.Pod) { p.Spec.SecurityContext.FSGroup = ptr.To[int64](-5) }, []string{"spec.securityContext.fsGroup: Invalid value"}},
		{"no restart policy", func(p *v1.Pod) { p.Spec.RestartPolicy = "" }, []string{"spec.restartPolicy: Required value"}},
		{"dns search", func(p *v1.Pod) { p.Spec.DNSConfig.Searches = []string{"bad_domain"} }, []string{"spec.dnsConfig.searches[0]: Invalid value"}},
		{"preemption policy", func(p *v1.Pod) { p.Spec.PreemptionPolicy = ptr.To(v1.PreemptionPolicy("Always")) }, []string{"spec.preemptionPolicy: Unsupported value"}},
		{"emptyDir size", func(p *v1.Pod) { p.Spec.Volumes[0].EmptyDir.SizeLimit = ptr.To(resource.MustParse("-1Gi")) }, []string{"spec.volumes[0].emptyDir.sizeLimit: Forbidden"}},
		{"subPathExpr with subPath", func(p *v1.Pod) { web(p).VolumeMounts[1].SubPathExpr = "$(POD)" }, []string{"spec.containers[0].volumeMounts[1].subPathExpr: Invalid value"}},
		{"recursive read-only on a writable mount", func(p *v1.Pod) { web(p).VolumeMounts[0].RecursiveReadOnly = ptr.To(v1.RecursiveReadOnlyEnabled) }, []string{"spec.containers[0].volumeMounts[0].recursiveReadOnly: Forbidden"}},
		{"annotation subscript", func(p *v1.Pod) { web(p).Env[2].ValueFrom.FieldRef.FieldPath = "metadata.annotations['Team/Owner']" }, nil},
		{"subscript on a plain field", func(p *v1.Pod) { web(p).Env[2].ValueFrom.FieldRef.FieldPath = "spec.nodeName['x']" }, []string{"spec.containers[0].env[2].valueFrom.fieldRef.fieldPath: Invalid value"}},
		{"cpu divisor", func(p *v1.Pod) {
			r := web(p).Env[3].ValueFrom.ResourceFieldRef
			r.Resource, r.Divisor = "requests.cpu", resource.MustParse("1Mi")
		}, []string{"spec.containers[0].env[3].valueFrom.resourceFieldRef.divisor: Invalid value"}},
		{"stop signal", func(p *v1.Pod) { web(p).Lifecycle.StopSignal = ptr.To(v1.SIGTERM) }, []string{"spec.containers[0].lifecycle.stopSignal: Forbidden"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := validPod()
			tc.mutate(pod)
			errs := Validate(pod)
			if got := errorKeys(errs); !slices.Equal(got, tc.want) {
				t.Errorf("Validate:\n got  %q\n want %q\n errors: %v", got, tc.want, errs)
			}
		})
	}
}

func errorKeys(errs field.ErrorList) []string {
	keys := []string{}
	for _, e := range errs {
		keys = append(keys, fmt.Sprintf("%s: %s", e.Field, e.Type))
	}
	if len(keys) == 0 {
		return nil
	}
	return keys
}

func TestValidateMessages(t *testing.T) {
	pod := validPod()
	pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: "web", Image: "x", ImagePullPolicy: "Always", TerminationMessagePolicy: "File"})
	pod.Spec.Volumes[0].VolumeSource = v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}
	var msgs []string
	for _, e := range Validate(pod) {
		msgs = append(msgs, e.Error())
	}
	for _, want := range []string{
		`spec.containers[1].name: Duplicate value: "web"`,
		`spec.volumes[0].configMap: Forbidden: needs an API server; berth runs standalone`,
	} {
		if !slices.Contains(msgs, want) {
			t.Errorf("messages %q lack %q", msgs, want)
		}
	}
}

func TestValidateIsStable(t *testing.T) {
	pod := validPod()
	pod.Labels = map[string]string{"a/": "1", "b/": "2", "c/": "3", "d/": "4"}
	pod.Spec.Containers[0].Resources.Limits["x"] = resource.MustParse("1")
	pod.Spec.Containers[0].Resources.Limits["y"] = resource.MustParse("1")
	first := FieldErrors(Validate(pod)).Error()
	for range 20 {
		if again := FieldErrors(Validate(pod)).Error(); again != first {
			t.Fatalf("Validate is not stable:\n%s\n%s", first, again)
		}
	}
	if !strings.Contains(first, "metadata.labels") {
		t.Errorf("expected label errors, got %s", first)
	}
}
