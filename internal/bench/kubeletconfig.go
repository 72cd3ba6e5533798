package bench

import (
	"fmt"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// kubeletParams are what the harness gives the upstream kubelet, all of
// its own: dirs under its root, ports, cgroup root and runtime.
type kubeletParams struct {
	root       string // the harness's dir for this node; the kubelet's --root-dir is below it
	manifests  string
	cgroupRoot string
	endpoint   string // the CRI endpoint of the containerd the harness started
	// readOnlyPort serves /pods as berth's does; port is the kubelet's
	// authenticated API (TLS, a self-signed certificate under its cert
	// dir) and healthzPort its /healthz.
	readOnlyPort, port, healthzPort int
	maxPods                         int
}

// kubeletConfig renders the KubeletConfiguration of a standalone kubelet
// (no API server, no kubeconfig) that runs the static pods of
// p.manifests, as berth runs them, on the same terms berth has in the
// harness: the cgroupfs driver under a cgroup root of its own, no swap
// check, eviction and image GC out of the way (the imported busybox and
// pause images must stay), parallel image pulls, and its pod logs under
// its root dir.
func kubeletConfig(p kubeletParams) ([]byte, error) {
	for name, v := range map[string]int{"readOnlyPort": p.readOnlyPort, "port": p.port, "healthzPort": p.healthzPort} {
		if v <= 0 || v > 65535 {
			return nil, fmt.Errorf("kubelet config: %s %d: not a TCP port", name, v)
		}
	}
	for name, v := range map[string]string{"root": p.root, "manifests": p.manifests, "cgroupRoot": p.cgroupRoot} {
		if !filepath.IsAbs(v) {
			return nil, fmt.Errorf("kubelet config: %s %q: not an absolute path", name, v)
		}
	}
	if p.endpoint == "" {
		return nil, fmt.Errorf("kubelet config: containerRuntimeEndpoint: empty")
	}
	if p.maxPods <= 0 {
		return nil, fmt.Errorf("kubelet config: maxPods %d: must be positive", p.maxPods)
	}
	cfg := kubeletv1beta1.KubeletConfiguration{
		TypeMeta:           metav1.TypeMeta{APIVersion: kubeletv1beta1.SchemeGroupVersion.String(), Kind: "KubeletConfiguration"},
		StaticPodPath:      p.manifests,
		Address:            "127.0.0.1",
		Port:               int32(p.port),
		ReadOnlyPort:       int32(p.readOnlyPort),
		HealthzBindAddress: "127.0.0.1",
		HealthzPort:        ptr.To(int32(p.healthzPort)),
		// Anonymous requests to the authenticated port are allowed: there
		// is no API server to ask (webhook) and nobody else on it.
		Authentication: kubeletv1beta1.KubeletAuthentication{
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(true)},
			Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(false)},
		},
		Authorization:            kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow},
		CgroupDriver:             "cgroupfs",
		CgroupRoot:               p.cgroupRoot,
		FailSwapOn:               ptr.To(false),
		FailCgroupV1:             ptr.To(false), // true by default since 1.35; the bench hosts may be v1
		ContainerRuntimeEndpoint: p.endpoint,
		ImageServiceEndpoint:     p.endpoint,
		// Each signal named: the defaults are not merged in
		// (mergeDefaultEvictionSettings is false by default).
		EvictionHard: map[string]string{
			"memory.available":   "1Mi",
			"nodefs.available":   "1%",
			"nodefs.inodesFree":  "1%",
			"imagefs.available":  "1%",
			"imagefs.inodesFree": "1%",
		},
		ImageGCHighThresholdPercent: ptr.To(int32(100)),
		ImageGCLowThresholdPercent:  ptr.To(int32(99)),
		SerializeImagePulls:         ptr.To(false),
		MaxPods:                     int32(p.maxPods),
		PodLogsDir:                  filepath.Join(p.root, "pod-logs"),
		// Its flexvolume prober creates this dir; the default is
		// /usr/libexec/kubernetes/kubelet-plugins/volume/exec.
		VolumePluginDir: filepath.Join(p.root, "volume-plugins"),
	}
	data, err := yaml.Marshal(&cfg)
	if err != nil {
		return nil, fmt.Errorf("kubelet config: %w", err)
	}
	return data, nil
}
