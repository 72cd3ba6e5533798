package images

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// benchGCNode is a node that has run berth for 30 days and holds 10,000
// images. Times are multiples of ImageListPeriod past began, since
// detections are the only clock the records ever see; that quantisation,
// the never-used images (zero lastUsed) and the images already there at
// the first detection (zero firstDetected) give the sort the long runs of
// equal keys it meets on a real node.
type benchGCNode struct {
	records   []imageRecord
	now       time.Time
	began     time.Time
	policy    Policy
	capacity  uint64
	available uint64
}

func newBenchGCNode(n int) benchGCNode {
	// A fixed seed keeps ns/op comparable between runs and machines.
	rng := rand.New(rand.NewPCG(2025, 6))
	began := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	now := began.Add(30 * 24 * time.Hour)
	ticks := int64(now.Sub(began) / ImageListPeriod)
	tick := func(from time.Time) time.Time {
		lo := int64(from.Sub(began) / ImageListPeriod)
		return began.Add(time.Duration(lo+rng.Int64N(ticks-lo+1)) * ImageListPeriod)
	}
	// Sizes are log-uniform from 2 MB (distroless, pause) to 4 GB (CUDA).
	lnMin, lnMax := math.Log(2e6), math.Log(4e9)
	var total uint64
	records := make([]imageRecord, n)
	for i := range records {
		sum := sha256.Sum256(fmt.Appendf(nil, "image-%d", i))
		repo := fmt.Sprintf("registry.example.com/team-%d/service-%d", i%40, i%700)
		r := imageRecord{
			id:      "sha256:" + hex.EncodeToString(sum[:]),
			tags:    []string{fmt.Sprintf("%s:v1.%d.%d", repo, i%23, i%11)},
			digests: []string{repo + "@sha256:" + hex.EncodeToString(sum[:])},
			size:    int64(math.Exp(lnMin + rng.Float64()*(lnMax-lnMin))),
		}
		if i%3 == 0 {
			r.tags = append(r.tags, repo+":latest")
		}
		switch p := rng.IntN(100); {
		case p < 8: // there before berth's first detection
		case p < 9: // just pulled, inside imageMinimumGCAge
			r.firstDetected = now.Add(-ImageListPeriod)
		default:
			r.firstDetected = tick(began)
		}
		switch p := rng.IntN(100); {
		case p < 35: // never seen in use
		case p < 39:
			r.inUse, r.lastUsed = true, now
		default:
			// Never before it was first detected, nor before began.
			from := began
			if r.firstDetected.After(from) {
				from = r.firstDetected
			}
			r.lastUsed = tick(from)
		}
		switch {
		case i == 0:
			r.pin = pinnedSandbox
		case i%2000 == 1:
			r.pin = pinnedConfigured
		case i%500 == 2:
			r.pin = pinnedByRuntime
		}
		total += uint64(r.size)
		records[i] = r
	}
	// The image filesystem holds little but images and is 97% full; a low
	// threshold of 50 (the default is 80) makes the GC free about half of
	// what may go, so that its answer is used well past its first entries.
	capacity := total * 100 / 97
	return benchGCNode{
		records:   records,
		now:       now,
		began:     began,
		policy:    Policy{HighThresholdPercent: 85, LowThresholdPercent: 50, MinAge: DefaultMinAge, MaxAge: 25 * 24 * time.Hour},
		capacity:  capacity,
		available: capacity - total,
	}
}

// gcChoice is what one GarbageCollect decides before its first removal: the
// max-age victims, the amount to free and the order to remove images in,
// cut where the removals (all assumed to succeed) reach that amount, as
// removeAll would cut it.
type gcChoice struct {
	maxAge      int
	bytesToFree int64
	candidates  int
	victims     int
	freed       int64
}

func chooseForGC(node benchGCNode) (gcChoice, error) {
	var c gcChoice
	c.maxAge = len(maxAgeVictims(node.records, node.now, node.began, node.policy.MaxAge))
	u, err := imageFsUsage(node.capacity, node.available, node.policy)
	if err != nil {
		return c, err
	}
	c.bytesToFree = u.bytesToFree
	order := chooseImagesToFree(node.records, node.now, node.policy.MinAge)
	c.candidates = len(order)
	for _, r := range order {
		if c.freed >= c.bytesToFree {
			break
		}
		c.freed += r.size
		c.victims++
	}
	return c, nil
}

// BenchmarkImageGCChoice10000 times the pure part of GarbageCollect over
// 10,000 images: maxAgeVictims, imageFsUsage and chooseImagesToFree (filter
// and LRU sort), then the walk down that order to the bytes to free. Both
// choices see the whole list; GarbageCollect gives the second a fresh
// snapshot without the max-age victims, so this is slightly pessimistic.
// Snapshotting the records and the removals themselves are left out: the
// first is a copy under the manager's lock, the second runtime I/O.
func BenchmarkImageGCChoice10000(b *testing.B) {
	node := newBenchGCNode(10000)
	if err := node.policy.Validate(); err != nil {
		b.Fatal(err)
	}
	want, err := chooseForGC(node)
	if err != nil {
		b.Fatal(err)
	}
	if want.freed < want.bytesToFree || want.victims < want.candidates/4 || want.maxAge == 0 {
		b.Fatalf("the data no longer exercises the choice: %+v", want)
	}
	b.ReportAllocs()
	for b.Loop() {
		got, err := chooseForGC(node)
		if err != nil || got != want {
			b.Fatalf("choice = %+v, %v; want %+v", got, err, want)
		}
	}
	b.ReportMetric(float64(want.candidates), "candidates")
	b.ReportMetric(float64(want.victims), "victims")
	b.ReportMetric(float64(want.maxAge), "maxage-victims")
}
