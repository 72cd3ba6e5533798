package images

import (
	"context"
	"fmt"
	"math"
	"time"

	v1 "k8s.io/api/core/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	"github.com/berth-dev/berth/internal/events"
)

// GarbageCollect applies the policy once. It detects images (and fails,
// removing nothing, when the runtime cannot say which are in use); removes
// the unused images older than imageMaximumGCAge; then, when the image
// filesystem's usage is at or above the high threshold, removes unused images
// least recently used first until usage would be at the low threshold (the
// seed's GarbageCollect and freeSpace). It returns the removal errors,
// aggregated, or an error saying it could not free enough. An image filesystem
// without capacity is an InvalidDiskCapacity event, not freeing enough a
// FreeDiskSpaceFailed event.
func (m *Manager) GarbageCollect(ctx context.Context) error {
	m.gcMu.Lock()
	defer m.gcMu.Unlock()
	freeTime := m.clk.Now()
	if err := m.detectImages(ctx, freeTime, false); err != nil {
		return err
	}
	var errs []error
	failed := map[string]bool{} // removals that failed this round are not tried again in it
	// Images old enough go first, and the filesystem is measured after, so
	// that their bytes count towards the low threshold.
	if victims := maxAgeVictims(m.snapshot(), freeTime, m.began, m.policy.MaxAge); len(victims) > 0 {
		_, err := m.removeAll(ctx, victims, freeTime, math.MaxInt64, failed, reasonAge, func(r imageRecord) string {
			return maxAgeReason(r, freeTime, m.began, m.policy.MaxAge)
		})
		if err != nil {
			// Not fatal: freeing space below may still succeed.
			errs = append(errs, fmt.Errorf("wanted to free images older than %s, encountered errors in image deletion: %w", shortDuration(m.policy.MaxAge), err))
		}
	}
	if err := m.freeDiskSpace(ctx, freeTime, failed); err != nil {
		errs = append(errs, err)
	}
	return utilerrors.NewAggregate(errs)
}

// freeDiskSpace is the threshold half of GarbageCollect.
func (m *Manager) freeDiskSpace(ctx context.Context, freeTime time.Time, failed map[string]bool) error {
	capacity, available, err := m.imageFsStats(ctx)
	if err != nil {
		m.metrics.errors.WithLabelValues(opFsStats).Inc()
		return fmt.Errorf("image filesystem stats: %w", err)
	}
	u, err := imageFsUsage(capacity, available, m.policy)
	if u.clamped {
		m.log.Warn("Image filesystem reports more available bytes than its capacity; using the capacity", "available", available, "capacity", capacity)
	}
	if err != nil { // no capacity
		m.events.NodeEvent(v1.EventTypeWarning, events.InvalidDiskCapacity, err.Error())
		return err
	}
	if !u.over {
		return nil
	}
	m.log.Info("Disk usage on image filesystem is over the high threshold, trying to free bytes down to the low threshold",
		"usage", u.percent, "highThreshold", m.policy.HighThresholdPercent, "amountToFree", u.bytesToFree, "lowThreshold", m.policy.LowThresholdPercent)
	why := fmt.Sprintf("freeing disk: image filesystem at %d%% >= %d%%", u.percent, m.policy.HighThresholdPercent)
	order := chooseImagesToFree(m.snapshot(), freeTime, m.policy.MinAge)
	freed, err := m.removeAll(ctx, order, freeTime, u.bytesToFree, failed, reasonSpace, func(imageRecord) string { return why })
	if err != nil {
		return fmt.Errorf("wanted to free %d bytes, but freed %d bytes space with errors in image deletion: %w", u.bytesToFree, freed, err)
	}
	if freed < u.bytesToFree {
		err := fmt.Errorf("failed to garbage collect required amount of images. Wanted to free %d bytes, but freed %d bytes", u.bytesToFree, freed)
		m.events.NodeEvent(v1.EventTypeWarning, events.FreeDiskSpaceFailed, err.Error())
		return err
	}
	return nil
}

func (m *Manager) imageFsStats(ctx context.Context) (capacity, available uint64, err error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return m.fsStats(ctx)
}

// DeleteUnusedImages is the eviction manager's reclaim: it removes every
// unused, unpinned image, whatever the thresholds and even when the periodic
// GC is off. As in the kubelet, imageMinimumGCAge still protects images just
// pulled. It returns the bytes freed, also when some removals failed.
func (m *Manager) DeleteUnusedImages(ctx context.Context) (freed int64, err error) {
	m.gcMu.Lock()
	defer m.gcMu.Unlock()
	m.log.Info("Attempting to delete unused images")
	freeTime := m.clk.Now()
	if err := m.detectImages(ctx, freeTime, false); err != nil {
		return 0, err
	}
	order := chooseImagesToFree(m.snapshot(), freeTime, m.policy.MinAge)
	freed, err = m.removeAll(ctx, order, freeTime, math.MaxInt64, map[string]bool{}, reasonSpace, func(imageRecord) string {
		return "reclaiming disk under pressure: deleting every unused image"
	})
	if err != nil {
		return freed, fmt.Errorf("freed %d bytes with errors in image deletion: %w", freed, err)
	}
	return freed, nil
}

// removeAll removes the images in order until the removals that succeeded
// add up to bytesToFree, going on past the ones that fail (the seed's
// freeSpace loop). It skips the images in failed and adds those it fails to
// remove. It returns the bytes freed and the removal errors, aggregated.
func (m *Manager) removeAll(ctx context.Context, order []imageRecord, freeTime time.Time, bytesToFree int64, failed map[string]bool, metricReason string, why func(imageRecord) string) (freed int64, err error) {
	var errs []error
	for _, r := range order {
		// Tested before each removal rather than after (the seed): the same
		// for any positive amount, and nothing goes when, with rounding,
		// nothing needs to.
		if freed >= bytesToFree {
			break
		}
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		if failed[r.id] || !m.stillCollectable(r.id, freeTime) {
			continue
		}
		if err := m.removeImage(ctx, r, metricReason, why(r)); err != nil {
			failed[r.id] = true
			errs = append(errs, err)
			continue
		}
		freed += r.size
	}
	return freed, utilerrors.NewAggregate(errs)
}

// stillCollectable checks id against the latest records just before its
// removal: a detection that ran since the decision may have found it in use
// or gone.
func (m *Manager) stillCollectable(id string, freeTime time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.records[id]
	if !ok || r.inUse || r.pin != "" || !r.lastUsed.Before(freeTime) {
		m.log.Debug("Image no longer eligible for garbage collection", "imageID", id)
		return false
	}
	return true
}

// removeImage removes one image, forgets its record and records the event.
func (m *Manager) removeImage(ctx context.Context, r imageRecord, metricReason, why string) error {
	m.log.Info("Removing image", "imageID", r.id, "tags", r.tags, "size", r.size, "reason", why)
	rctx, cancel := context.WithTimeout(ctx, callTimeout)
	err := m.runtime.RemoveImage(rctx, r.id)
	cancel()
	if err != nil {
		m.metrics.errors.WithLabelValues(opRemove).Inc()
		m.log.Warn("Failed to remove image; retrying at the next period", "imageID", r.id, "err", err)
		return fmt.Errorf("remove image %s: %w", r.id, err)
	}
	m.mu.Lock()
	delete(m.records, r.id)
	m.mu.Unlock()
	m.metrics.collected.WithLabelValues(metricReason).Inc()
	m.events.NodeEvent(v1.EventTypeNormal, ReasonImageGarbageCollected, fmt.Sprintf("Removed image %s: %s", describeImage(r), why))
	return nil
}
