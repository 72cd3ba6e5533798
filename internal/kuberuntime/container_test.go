package kuberuntime

import (
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/container"
)

func appPod() *v1.Pod {
	grace := int64(10)
	return &v1.Pod{
		ObjectMeta: metaWith("web", "prod", "uid-9", map[string]string{"app": "web"}, nil),
		Spec: v1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			SecurityContext:               &v1.PodSecurityContext{},
			Volumes:                       []v1.Volume{{Name: "data"}},
			Containers: []v1.Container{{
				Name:       "app",
				Image:      "registry.local/app:1",
				Command:    []string{"/bin/app", "--name=$(POD_NAME)"},
				Args:       []string{"--greeting=$(GREETING)", "--literal=$$(GREETING)", "--unset=$(NOPE)"},
				WorkingDir: "/work",
				Env: []v1.EnvVar{
					fieldEnv("POD_NAME", "metadata.name"),
					{Name: "GREETING", Value: "hello-$(POD_NAME)"},
				},
				VolumeMounts:             []v1.VolumeMount{{Name: "data", MountPath: "/data"}},
				TerminationMessagePath:   "/dev/termination-log",
				TerminationMessagePolicy: v1.TerminationMessageReadFile,
				Stdin:                    true,
				TTY:                      true,
				Resources:                reqs(res("cpu", "100m", "memory", "64Mi"), res("cpu", "200m", "memory", "128Mi")),
			}},
		},
	}
}

func TestContainerConfig(t *testing.T) {
	pod := appPod()
	c := &pod.Spec.Containers[0]
	opts := ContainerOptions{
		RestartCount:               3,
		VolumePaths:                map[string]string{"data": "/var/lib/berth/pods/uid-9/volumes/kubernetes.io~empty-dir/data"},
		TerminationMessageHostPath: "/var/lib/berth/pods/uid-9/containers/app/term-3",
		ImageRef:                   "sha256:abc",
		NodeMemoryCapacity:         4 * gi,
	}
	cfg, err := ContainerConfig(pod, c, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := &runtimeapi.ContainerConfig{
		Metadata:   &runtimeapi.ContainerMetadata{Name: "app", Attempt: 3},
		Image:      &runtimeapi.ImageSpec{Image: "sha256:abc", UserSpecifiedImage: "registry.local/app:1"},
		Command:    []string{"/bin/app", "--name=web"},
		Args:       []string{"--greeting=hello-web", "--literal=$(GREETING)", "--unset=$(NOPE)"},
		WorkingDir: "/work",
		Envs: []*runtimeapi.KeyValue{
			{Key: "POD_NAME", Value: []byte("web")},
			{Key: "GREETING", Value: []byte("hello-web")},
		},
		Mounts: []*runtimeapi.Mount{
			{ContainerPath: "/data", HostPath: "/var/lib/berth/pods/uid-9/volumes/kubernetes.io~empty-dir/data"},
			{ContainerPath: "/dev/termination-log", HostPath: "/var/lib/berth/pods/uid-9/containers/app/term-3"},
		},
		Labels: map[string]string{
			container.LabelPodName:       "web",
			container.LabelPodNamespace:  "prod",
			container.LabelPodUID:        "uid-9",
			container.LabelContainerName: "app",
			container.LabelManagedBy:     "true",
		},
		Annotations: map[string]string{
			container.AnnotationContainerHash:              ContainerHash(c),
			container.AnnotationRestartCount:               "3",
			container.AnnotationTerminationMessagePath:     "/dev/termination-log",
			container.AnnotationTerminationMessagePolicy:   "File",
			container.AnnotationTerminationMessageHostPath: "/var/lib/berth/pods/uid-9/containers/app/term-3",
			container.AnnotationTerminationGracePeriod:     "10",
		},
		LogPath: "app/3.log",
		Stdin:   true,
		Tty:     true,
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources: &runtimeapi.LinuxContainerResources{
				CpuPeriod: 100000, CpuQuota: 20000, CpuShares: 102, MemoryLimitInBytes: 128 << 20,
				OomScoreAdj: 1000 - 1000*(64<<20)/(4*gi),
			},
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{
					Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD,
					UsernsOptions: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE},
				},
				MaskedPaths:   defaultMaskedPaths(),
				ReadonlyPaths: defaultReadonlyPaths(),
				Seccomp:       &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined},
			},
		},
	}
	if !proto.Equal(cfg, want) {
		t.Errorf("ContainerConfig =\n%v\nwant\n%v", cfg, want)
	}
}

func TestContainerConfigInitAndImageFallback(t *testing.T) {
	pod := appPod()
	pod.Spec.TerminationGracePeriodSeconds = nil
	c := &pod.Spec.Containers[0]
	c.Resources = v1.ResourceRequirements{}
	c.VolumeMounts = nil
	cfg, err := ContainerConfig(pod, c, ContainerOptions{Init: true})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Image.Image != "registry.local/app:1" {
		t.Errorf("image = %q", cfg.Image.Image)
	}
	if cfg.Annotations[container.AnnotationInitContainer] != "true" {
		t.Errorf("annotations = %v", cfg.Annotations)
	}
	if _, ok := cfg.Annotations[container.AnnotationTerminationGracePeriod]; ok {
		t.Error("grace period annotation without a grace period")
	}
	if _, ok := cfg.Annotations[container.AnnotationTerminationMessageHostPath]; ok {
		t.Error("host path annotation without a host path")
	}
	if len(cfg.Mounts) != 0 {
		t.Errorf("mounts = %v, want none", cfg.Mounts)
	}
	if cfg.LogPath != "app/0.log" || cfg.Linux.Resources.OomScoreAdj != 1000 || cfg.Linux.Resources.CpuShares != 2 {
		t.Errorf("log path %q, resources %v", cfg.LogPath, cfg.Linux.Resources)
	}
}

func TestContainerConfigErrorsNameTheContainer(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*v1.Container)
		opts    ContainerOptions
		wantErr string
	}{
		{"missing volume", func(c *v1.Container) {}, ContainerOptions{NodeMemoryCapacity: gi},
			`container "app": volumeMounts[0] (data): volume "data" is not among the pod's prepared volumes`},
		{"escaping subPath", func(c *v1.Container) { c.VolumeMounts[0].SubPath = "../../etc" },
			ContainerOptions{VolumePaths: map[string]string{"data": "/v"}, NodeMemoryCapacity: gi},
			`container "app": volumeMounts[0] (data): subPath "../../etc": must not contain '..'`},
		{"unknown fieldRef", func(c *v1.Container) { c.Env = append(c.Env, fieldEnv("X", "status.phase")) },
			ContainerOptions{VolumePaths: map[string]string{"data": "/v"}, NodeMemoryCapacity: gi},
			`container "app": env[2] "X": valueFrom.fieldRef: unsupported fieldPath "status.phase"`},
		{"burstable without memory capacity", func(c *v1.Container) {},
			ContainerOptions{VolumePaths: map[string]string{"data": "/v"}},
			`container "app": the node's memory capacity is needed`},
		{"negative restart count", func(c *v1.Container) {}, ContainerOptions{RestartCount: -1},
			`container "app": negative restart count`},
		{"runAsNonRoot", func(c *v1.Container) { c.SecurityContext = &v1.SecurityContext{RunAsNonRoot: ptr(true)} },
			ContainerOptions{VolumePaths: map[string]string{"data": "/v"}, ImageUID: ptr(int64(0)), NodeMemoryCapacity: gi},
			`container "app": container has runAsNonRoot and image will run as root (pod: "web_prod(uid-9)", container: app)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := appPod()
			tt.mutate(&pod.Spec.Containers[0])
			_, err := ContainerConfig(pod, &pod.Spec.Containers[0], tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestContainerHash(t *testing.T) {
	a := appPod().Spec.Containers[0]
	b := appPod().Spec.Containers[0]
	if ContainerHash(&a) != ContainerHash(&b) {
		t.Error("equal containers hash differently")
	}
	h := ContainerHash(&a)
	if h == "" || strings.Trim(h, "0123456789abcdef") != "" || len(h) > 8 {
		t.Errorf("hash %q is not a 32-bit hex value", h)
	}
	for name, mutate := range map[string]func(*v1.Container){
		"image": func(c *v1.Container) { c.Image = "registry.local/app:2" },
		"name":  func(c *v1.Container) { c.Name = "other" },
	} {
		c := appPod().Spec.Containers[0]
		mutate(&c)
		if ContainerHash(&c) == h {
			t.Errorf("changing %s leaves the hash unchanged", name)
		}
	}
	// Other fields do not count, so that a berth upgrade which defaults a
	// new field restarts nothing.
	for name, mutate := range map[string]func(*v1.Container){
		"env":           func(c *v1.Container) { c.Env[1].Value = "bye" },
		"limits":        func(c *v1.Container) { c.Resources.Limits = res("cpu", "1") },
		"a new default": func(c *v1.Container) { c.TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError },
	} {
		c := appPod().Spec.Containers[0]
		mutate(&c)
		if ContainerHash(&c) != h {
			t.Errorf("changing %s changes the hash", name)
		}
	}
}

func TestContainerLogPath(t *testing.T) {
	if got := ContainerLogPath("app", 12); got != "app/12.log" {
		t.Errorf("got %q", got)
	}
}

// ContainerLogFile finds, from what ListContainers says of a container,
// the file its sandbox's and its own config put its log in; a container
// berth did not label has none.
func TestContainerLogFile(t *testing.T) {
	pod := appPod()
	sb, _, err := SandboxConfig(pod, SandboxOptions{PodLogsDir: "/var/log/pods"}, testHostDNS)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ContainerConfig(pod, &pod.Spec.Containers[0], ContainerOptions{RestartCount: 3, NodeMemoryCapacity: 1 << 30, VolumePaths: map[string]string{"data": "/v"}})
	if err != nil {
		t.Fatal(err)
	}
	listed := &runtimeapi.Container{Id: "c1", Metadata: cfg.Metadata, Labels: cfg.Labels}
	want := filepath.Join(sb.LogDirectory, cfg.LogPath)
	if got := ContainerLogFile("/var/log/pods", listed); got != want {
		t.Errorf("ContainerLogFile = %q, want the configured %q", got, want)
	}
	for name, c := range map[string]*runtimeapi.Container{
		"no labels":   {Id: "c2", Metadata: cfg.Metadata},
		"no pod UID":  {Id: "c3", Metadata: cfg.Metadata, Labels: map[string]string{container.LabelPodName: "p", container.LabelPodNamespace: "ns"}},
		"no metadata": {Id: "c4", Labels: cfg.Labels},
	} {
		if got := ContainerLogFile("/var/log/pods", c); got != "" {
			t.Errorf("%s: ContainerLogFile = %q, want none", name, got)
		}
	}
	if got := ContainerLogFile("", listed); got != "" {
		t.Errorf("without a pod logs dir: %q, want none", got)
	}
}
