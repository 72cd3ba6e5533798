package config

import (
	"fmt"
	"maps"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/berth-dev/berth/internal/eviction"
)

// The kubelet's eviction and container GC defaults.
const (
	DefaultEvictionPressureTransitionPeriod = 5 * time.Minute
	DefaultEvictionMonitoringInterval       = 10 * time.Second
	DefaultMaxPerPodContainer               = 1
	DefaultMaxContainers                    = -1
	DefaultContainerGCPeriod                = time.Minute
)

// Eviction is when berth reclaims node resources and evicts pods
// (evictionHard, evictionSoft, evictionSoftGracePeriod,
// evictionMinimumReclaim, evictionPressureTransitionPeriod,
// evictionMaxPodGracePeriod), as signal → value maps in the kubelet's form.
type Eviction struct {
	Hard, Soft, SoftGracePeriod, MinimumReclaim map[string]string
	// PressureTransitionPeriod is how long a pressure condition stays after
	// its threshold was last met.
	PressureTransitionPeriod time.Duration
	// MaxPodGracePeriod caps the grace period of pods evicted for a soft
	// threshold, in seconds.
	MaxPodGracePeriod int32
	// MonitoringInterval is how often signals are observed (the kubelet's
	// is fixed at 10 s; --eviction-monitoring-interval).
	MonitoringInterval time.Duration
}

// ContainerGC is how dead containers are collected: the kubelet's
// --minimum-container-ttl-duration, --maximum-dead-containers-per-container
// and --maximum-dead-containers, which have no configuration file field.
type ContainerGC struct {
	MinAge             time.Duration
	MaxPerPodContainer int32
	MaxContainers      int32
	// Period is how often the container GC runs (the kubelet's is 1 minute).
	Period time.Duration
}

func defaultEviction() Eviction {
	return Eviction{
		Hard:                     eviction.DefaultEvictionHard(),
		PressureTransitionPeriod: DefaultEvictionPressureTransitionPeriod,
		MonitoringInterval:       DefaultEvictionMonitoringInterval,
	}
}

func defaultContainerGC() ContainerGC {
	return ContainerGC{
		MaxPerPodContainer: DefaultMaxPerPodContainer,
		MaxContainers:      DefaultMaxContainers,
		Period:             DefaultContainerGCPeriod,
	}
}

// applyEvictionFile copies the eviction fields the file sets. As in the
// kubelet, an evictionHard map replaces the defaults unless
// mergeDefaultEvictionSettings asks to merge them in.
func applyEvictionFile(e *Eviction, kc *kubeletconfigv1beta1.KubeletConfiguration, set map[string]bool) {
	if set["evictionHard"] {
		hard := maps.Clone(kc.EvictionHard)
		if kc.MergeDefaultEvictionSettings != nil && *kc.MergeDefaultEvictionSettings {
			hard = eviction.DefaultEvictionHard()
			maps.Copy(hard, kc.EvictionHard)
		}
		e.Hard = hard
	}
	if set["evictionSoft"] {
		e.Soft = maps.Clone(kc.EvictionSoft)
	}
	if set["evictionSoftGracePeriod"] {
		e.SoftGracePeriod = maps.Clone(kc.EvictionSoftGracePeriod)
	}
	if set["evictionMinimumReclaim"] {
		e.MinimumReclaim = maps.Clone(kc.EvictionMinimumReclaim)
	}
	// 0s means the default, as in the kubelet.
	if d := kc.EvictionPressureTransitionPeriod.Duration; d != 0 {
		e.PressureTransitionPeriod = d
	}
	if set["evictionMaxPodGracePeriod"] {
		e.MaxPodGracePeriod = kc.EvictionMaxPodGracePeriod
	}
}

// parseSignalMap parses the kubelet's flag form of an eviction map:
// "memory.available<100Mi,nodefs.available<10%" (sep "<") or
// "memory.available=30s" (sep "=").
func parseSignalMap(flag, value, sep string) (map[string]string, error) {
	out := map[string]string{}
	for _, item := range strings.Split(value, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, sep)
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("--%s: %q: want signal%svalue", flag, item, sep)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, nil
}

// Thresholds parses the eviction maps into thresholds.
func (e Eviction) Thresholds() ([]eviction.Threshold, error) {
	return eviction.ParseThresholdConfig(e.Hard, e.Soft, e.SoftGracePeriod, e.MinimumReclaim)
}

func (e Eviction) validate() []error {
	var errs []error
	if _, err := e.Thresholds(); err != nil {
		errs = append(errs, err)
	}
	if e.PressureTransitionPeriod < 0 {
		errs = append(errs, fmt.Errorf("evictionPressureTransitionPeriod (--%s): %s: must not be negative", flagEvictionPressureTransitionPeriod, e.PressureTransitionPeriod))
	}
	if e.MaxPodGracePeriod < 0 {
		errs = append(errs, fmt.Errorf("evictionMaxPodGracePeriod (--%s): %d: must not be negative", flagEvictionMaxPodGracePeriod, e.MaxPodGracePeriod))
	}
	if e.MonitoringInterval <= 0 {
		errs = append(errs, fmt.Errorf("--%s: %s: must be positive", flagEvictionMonitoringInterval, e.MonitoringInterval))
	}
	return errs
}

func (c ContainerGC) validate() []error {
	var errs []error
	if c.MinAge < 0 {
		errs = append(errs, fmt.Errorf("--%s: %s: must not be negative", flagMinimumContainerTTL, c.MinAge))
	}
	if c.Period <= 0 {
		errs = append(errs, fmt.Errorf("--%s: %s: must be positive", flagContainerGCPeriod, c.Period))
	}
	return errs
}

// writeBackEviction records the effective eviction settings.
func writeBackEviction(kc *kubeletconfigv1beta1.KubeletConfiguration, e Eviction) {
	kc.EvictionHard = e.Hard
	kc.EvictionSoft = e.Soft
	kc.EvictionSoftGracePeriod = e.SoftGracePeriod
	kc.EvictionMinimumReclaim = e.MinimumReclaim
	kc.EvictionPressureTransitionPeriod = metav1.Duration{Duration: e.PressureTransitionPeriod}
	kc.EvictionMaxPodGracePeriod = e.MaxPodGracePeriod
}

// signalMapFlags are the eviction map flags with their separators.
func signalMapFlags(e *Eviction) []struct {
	name, sep string
	dst       *map[string]string
} {
	return []struct {
		name, sep string
		dst       *map[string]string
	}{
		{flagEvictionHard, "<", &e.Hard},
		{flagEvictionSoft, "<", &e.Soft},
		{flagEvictionSoftGracePeriod, "=", &e.SoftGracePeriod},
		{flagEvictionMinimumReclaim, "=", &e.MinimumReclaim},
	}
}
