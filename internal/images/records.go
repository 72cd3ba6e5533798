package images

import (
	"math"
	"slices"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// imageRecord is what the GC knows of one image (the seed's imageRecord,
// with the image's names and whether it is protected, so that decisions and
// verdicts need nothing else).
type imageRecord struct {
	id      string
	tags    []string // RepoTags, as the runtime reports them
	digests []string // RepoDigests
	size    int64
	// firstDetected is when the image was first seen; zero when it was
	// already there at the first detection ("unknown, in the past").
	firstDetected time.Time
	// lastUsed is the last detection that found the image in use; zero if
	// none did.
	lastUsed time.Time
	// inUse and pin are as of the latest detection.
	inUse bool
	pin   pinReason
}

// pinReason says why an image is pinned; "" when it is not.
type pinReason string

const (
	pinnedSandbox    pinReason = "sandbox image"
	pinnedConfigured pinReason = "configured"
	pinnedByRuntime  pinReason = "by the runtime"
)

// pins are the images berth pins by name, besides those the runtime pins.
type pins struct {
	sandbox, configured refSet
}

// reason returns why the image with these keys is pinned, or "".
func (p pins) reason(img *runtimeapi.Image, keys []string) pinReason {
	switch {
	case p.sandbox.has(keys):
		return pinnedSandbox
	case p.configured.has(keys):
		return pinnedConfigured
	case img.GetPinned():
		return pinnedByRuntime
	}
	return ""
}

// observe updates records with one detection (the seed's detectImages once
// the runtime has answered): a new image is recorded as first detected at
// detectTime; an image in use is marked used at now; names, size and pinning
// are refreshed; the records of images the runtime no longer has are
// dropped.
func observe(records map[string]*imageRecord, images []*runtimeapi.Image, inUse refSet, pinned pins, detectTime, now time.Time) {
	present := make(map[string]bool, len(images))
	for _, img := range images {
		id := img.GetId()
		if id == "" {
			continue
		}
		present[id] = true
		r, ok := records[id]
		if !ok {
			r = &imageRecord{id: id, firstDetected: detectTime}
			records[id] = r
		}
		keys := imageKeys(img)
		r.inUse = inUse.has(keys)
		if r.inUse {
			r.lastUsed = now
		}
		r.size = int64(min(img.GetSize(), math.MaxInt64))
		r.tags = slices.Clone(img.GetRepoTags())
		r.digests = slices.Clone(img.GetRepoDigests())
		r.pin = pinned.reason(img, keys)
	}
	for id := range records {
		if !present[id] {
			delete(records, id)
		}
	}
}
