package eviction

import (
	"context"
)

// ImageGC deletes unused images; berth's images.Manager is one.
type ImageGC interface {
	// DeleteUnusedImages removes every image no container uses, whatever
	// the image GC's thresholds, and returns the bytes freed.
	DeleteUnusedImages(ctx context.Context) (freed int64, err error)
}

// ContainerGC deletes dead containers.
type ContainerGC interface {
	// DeleteAllUnusedContainers removes every exited container, also those
	// of pods that are terminated but not yet deleted.
	DeleteAllUnusedContainers(ctx context.Context) error
}

// The names of the reclaim steps, for logs and tests.
const (
	reclaimContainers = "DeleteAllUnusedContainers"
	reclaimImages     = "DeleteUnusedImages"
)

// reclaimStep is one way to free a resource without evicting a pod.
type reclaimStep struct {
	name string
	run  func(ctx context.Context) error
}

// reclaimSteps maps each signal to what frees it, in order (the seed's
// buildSignalToNodeReclaimFuncs). With an image filesystem of its own,
// nodefs pressure has nothing to reclaim (berth does not delete logs) and
// imagefs pressure deletes dead containers then unused images; without one,
// both filesystems are the same disk and share those steps. Memory and PIDs
// have none. A nil collector contributes no step.
func reclaimSteps(images ImageGC, containers ContainerGC, withImageFs bool) map[Signal][]reclaimStep {
	var disk []reclaimStep
	if containers != nil {
		disk = append(disk, reclaimStep{reclaimContainers, containers.DeleteAllUnusedContainers})
	}
	if images != nil {
		disk = append(disk, reclaimStep{reclaimImages, func(ctx context.Context) error {
			_, err := images.DeleteUnusedImages(ctx)
			return err
		}})
	}
	m := map[Signal][]reclaimStep{
		SignalImageFsAvailable:  disk,
		SignalImageFsInodesFree: disk,
	}
	if withImageFs {
		m[SignalNodeFsAvailable] = nil
		m[SignalNodeFsInodesFree] = nil
	} else {
		m[SignalNodeFsAvailable] = disk
		m[SignalNodeFsInodesFree] = disk
	}
	return m
}
