package images

import (
	"context"
	"slices"
	"time"
)

// ImageStatus is one image as `berth images` and the local API show it.
type ImageStatus struct {
	ID          string   `json:"id"`
	RepoTags    []string `json:"repoTags,omitempty"`
	RepoDigests []string `json:"repoDigests,omitempty"`
	// Size is in bytes.
	Size int64 `json:"size"`
	// FirstDetected is absent for an image that was already there when
	// berth first looked.
	FirstDetected time.Time `json:"firstDetected,omitzero"`
	// LastUsed is absent for an image never seen in use.
	LastUsed time.Time `json:"lastUsed,omitzero"`
	InUse    bool      `json:"inUse"`
	Pinned   bool      `json:"pinned"`
	// Verdict says why the image would or would not be collected now.
	Verdict string `json:"verdict"`
}

// Images detects the runtime's images and returns them in the order the GC
// would take them (least recently used first), each with its verdict.
func (m *Manager) Images(ctx context.Context) ([]ImageStatus, error) {
	if err := m.detectImages(ctx, time.Time{}, true); err != nil {
		return nil, err
	}
	now := m.clk.Now()
	records := inEvictionOrder(m.snapshot(), func(*imageRecord) bool { return true })
	out := make([]ImageStatus, 0, len(records))
	for _, r := range records {
		out = append(out, ImageStatus{
			ID:            r.id,
			RepoTags:      slices.Clone(r.tags),
			RepoDigests:   slices.Clone(r.digests),
			Size:          r.size,
			FirstDetected: r.firstDetected,
			LastUsed:      r.lastUsed,
			InUse:         r.inUse,
			Pinned:        r.pin != "",
			Verdict:       verdict(r, now, m.began, m.policy),
		})
	}
	return out, nil
}
