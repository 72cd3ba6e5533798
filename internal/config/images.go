package config

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// The kubelet's image defaults.
const (
	DefaultImageGCHighThresholdPercent = 85
	DefaultImageGCLowThresholdPercent  = 80
	DefaultImageMinimumGCAge           = 2 * time.Minute
	DefaultImageGCPeriod               = 5 * time.Minute
)

// Images is how berth pulls and collects images.
type Images struct {
	// GCHighThresholdPercent is the image filesystem usage at which image
	// GC starts (imageGCHighThresholdPercent); 100 turns the periodic GC off.
	GCHighThresholdPercent int32
	// GCLowThresholdPercent is the usage it frees down to
	// (imageGCLowThresholdPercent).
	GCLowThresholdPercent int32
	// MinimumGCAge: an image detected more recently is not collected
	// (imageMinimumGCAge).
	MinimumGCAge time.Duration
	// MaximumGCAge: an image unused for longer is collected whatever the
	// disk usage (imageMaximumGCAge); 0 turns it off.
	MaximumGCAge time.Duration
	// SerializePulls pulls one image at a time (serializeImagePulls).
	SerializePulls bool
	// MaxParallelPulls bounds parallel pulls when they are not serialized
	// (maxParallelImagePulls); 0 means no bound.
	MaxParallelPulls int32
	// Pinned images are never collected (--pinned-image), besides the
	// sandbox image and those the runtime pins.
	Pinned []string
	// GCPeriod is how often the periodic image GC runs (--image-gc-period;
	// the kubelet's is fixed at 5 minutes).
	GCPeriod time.Duration
}

func defaultImages() Images {
	return Images{
		GCHighThresholdPercent: DefaultImageGCHighThresholdPercent,
		GCLowThresholdPercent:  DefaultImageGCLowThresholdPercent,
		MinimumGCAge:           DefaultImageMinimumGCAge,
		SerializePulls:         true,
		GCPeriod:               DefaultImageGCPeriod,
	}
}

// ParallelPulls is how many pulls may run at once; 0 for no bound.
func (i Images) ParallelPulls() int {
	if i.SerializePulls {
		return 1
	}
	return int(i.MaxParallelPulls)
}

// applyImagesFile copies the image fields the file sets.
func applyImagesFile(i *Images, kc *kubeletconfigv1beta1.KubeletConfiguration, set map[string]bool) {
	if set["imageGCHighThresholdPercent"] && kc.ImageGCHighThresholdPercent != nil {
		i.GCHighThresholdPercent = *kc.ImageGCHighThresholdPercent
	}
	if set["imageGCLowThresholdPercent"] && kc.ImageGCLowThresholdPercent != nil {
		i.GCLowThresholdPercent = *kc.ImageGCLowThresholdPercent
	}
	if set["imageMinimumGCAge"] {
		i.MinimumGCAge = kc.ImageMinimumGCAge.Duration
	}
	if set["imageMaximumGCAge"] {
		i.MaximumGCAge = kc.ImageMaximumGCAge.Duration
	}
	if kc.SerializeImagePulls != nil {
		i.SerializePulls = *kc.SerializeImagePulls
	}
	if kc.MaxParallelImagePulls != nil {
		i.MaxParallelPulls = *kc.MaxParallelImagePulls
	}
}

// validate checks the image settings as the kubelet's validation does.
func (i Images) validate() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if p := i.GCHighThresholdPercent; p < 0 || p > 100 {
		bad("imageGCHighThresholdPercent (--%s): %d: must be between 0 and 100", flagImageGCHigh, p)
	}
	if p := i.GCLowThresholdPercent; p < 0 || p > 100 {
		bad("imageGCLowThresholdPercent (--%s): %d: must be between 0 and 100", flagImageGCLow, p)
	}
	if i.GCLowThresholdPercent > i.GCHighThresholdPercent {
		bad("imageGCLowThresholdPercent (--%s): %d: must not be above imageGCHighThresholdPercent (--%s) %d",
			flagImageGCLow, i.GCLowThresholdPercent, flagImageGCHigh, i.GCHighThresholdPercent)
	}
	if i.MinimumGCAge < 0 {
		bad("imageMinimumGCAge: %s: must not be negative", i.MinimumGCAge)
	}
	if i.MaximumGCAge < 0 {
		bad("imageMaximumGCAge: %s: must not be negative", i.MaximumGCAge)
	}
	if i.MaximumGCAge > 0 && i.MaximumGCAge <= i.MinimumGCAge {
		bad("imageMaximumGCAge: %s: must be greater than imageMinimumGCAge %s", i.MaximumGCAge, i.MinimumGCAge)
	}
	if i.MaxParallelPulls < 0 {
		bad("maxParallelImagePulls: %d: must be positive", i.MaxParallelPulls)
	}
	if i.SerializePulls && i.MaxParallelPulls > 1 {
		bad("maxParallelImagePulls: %d: must be 1 or unset while serializeImagePulls (--%s) is true", i.MaxParallelPulls, flagSerializeImagePulls)
	}
	if i.GCPeriod <= 0 {
		bad("--%s: %s: must be positive", flagImageGCPeriod, i.GCPeriod)
	}
	for _, p := range i.Pinned {
		if p == "" {
			bad("--%s: an empty image name", flagPinnedImage)
		}
	}
	return errs
}

// writeBackImages records the effective image settings.
func writeBackImages(kc *kubeletconfigv1beta1.KubeletConfiguration, i Images) {
	kc.ImageGCHighThresholdPercent = &i.GCHighThresholdPercent
	kc.ImageGCLowThresholdPercent = &i.GCLowThresholdPercent
	kc.ImageMinimumGCAge = metav1.Duration{Duration: i.MinimumGCAge}
	kc.ImageMaximumGCAge = metav1.Duration{Duration: i.MaximumGCAge}
	kc.SerializeImagePulls = &i.SerializePulls
	if i.MaxParallelPulls > 0 {
		kc.MaxParallelImagePulls = &i.MaxParallelPulls
	}
}
