package config

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// The kubelet's container log rotation defaults.
const (
	DefaultContainerLogMaxSize         = "10Mi"
	DefaultContainerLogMaxFiles        = 5
	DefaultContainerLogMaxWorkers      = 1
	DefaultContainerLogMonitorInterval = 10 * time.Second
	// minContainerLogMonitorInterval is the kubelet's lower bound.
	minContainerLogMonitorInterval = 3 * time.Second
)

// ContainerLogs is how container log files are rotated.
type ContainerLogs struct {
	// MaxSize is the size in bytes at which a container's log file is
	// rotated (containerLogMaxSize); negative turns rotation off, as it
	// does for the kubelet.
	MaxSize int64
	// MaxSizeText is containerLogMaxSize as written.
	MaxSizeText string
	// MaxFiles is how many log files a container may have, the one being
	// written included (containerLogMaxFiles).
	MaxFiles int32
	// MaxWorkers is how many containers are rotated at once
	// (containerLogMaxWorkers).
	MaxWorkers int32
	// MonitorInterval is how often log sizes are checked
	// (containerLogMonitorInterval).
	MonitorInterval time.Duration
}

func defaultContainerLogs() ContainerLogs {
	return ContainerLogs{
		MaxSize:         10 << 20,
		MaxSizeText:     DefaultContainerLogMaxSize,
		MaxFiles:        DefaultContainerLogMaxFiles,
		MaxWorkers:      DefaultContainerLogMaxWorkers,
		MonitorInterval: DefaultContainerLogMonitorInterval,
	}
}

// applyContainerLogsFile copies the rotation fields the file sets; a size
// that is no quantity is reported here, where its text is still at hand.
func applyContainerLogsFile(l *ContainerLogs, kc *kubeletconfigv1beta1.KubeletConfiguration, set map[string]bool) error {
	if kc.ContainerLogMaxFiles != nil {
		l.MaxFiles = *kc.ContainerLogMaxFiles
	}
	if kc.ContainerLogMaxWorkers != nil {
		l.MaxWorkers = *kc.ContainerLogMaxWorkers
	}
	if kc.ContainerLogMonitorInterval != nil {
		l.MonitorInterval = kc.ContainerLogMonitorInterval.Duration
	}
	if !set["containerLogMaxSize"] || kc.ContainerLogMaxSize == "" {
		return nil
	}
	size, err := parseLogMaxSize(kc.ContainerLogMaxSize)
	if err != nil {
		return fmt.Errorf("containerLogMaxSize: %q: %w", kc.ContainerLogMaxSize, err)
	}
	l.MaxSize, l.MaxSizeText = size, kc.ContainerLogMaxSize
	return nil
}

// parseLogMaxSize reads a quantity ("10Mi", "256Ki") as bytes, as the
// kubelet's parseMaxSize does.
func parseLogMaxSize(s string) (int64, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("not a quantity (like 10Mi or 256Ki): %w", err)
	}
	size, ok := q.AsInt64()
	if !ok {
		return 0, fmt.Errorf("not a whole number of bytes")
	}
	return size, nil
}

// validate checks what the kubelet's validation checks.
func (l ContainerLogs) validate() []error {
	var errs []error
	if l.MaxFiles <= 1 {
		errs = append(errs, fmt.Errorf("containerLogMaxFiles: %d: must be greater than 1", l.MaxFiles))
	}
	if l.MaxWorkers < 1 {
		errs = append(errs, fmt.Errorf("containerLogMaxWorkers: %d: must be at least 1", l.MaxWorkers))
	}
	if l.MonitorInterval < minContainerLogMonitorInterval {
		errs = append(errs, fmt.Errorf("containerLogMonitorInterval: %s: must be at least %s",
			l.MonitorInterval, minContainerLogMonitorInterval))
	}
	return errs
}

// writeBackContainerLogs records the effective rotation settings.
func writeBackContainerLogs(kc *kubeletconfigv1beta1.KubeletConfiguration, l ContainerLogs) {
	kc.ContainerLogMaxSize = l.MaxSizeText
	kc.ContainerLogMaxFiles = &l.MaxFiles
	kc.ContainerLogMaxWorkers = &l.MaxWorkers
	kc.ContainerLogMonitorInterval = &metav1.Duration{Duration: l.MonitorInterval}
}

// containerLogsFields are the KubeletConfiguration fields ContainerLogs
// honours.
var containerLogsFields = []string{
	"containerLogMaxSize", "containerLogMaxFiles", "containerLogMaxWorkers", "containerLogMonitorInterval",
}
