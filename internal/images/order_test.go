package images

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"
)

// referenceOrder is the choice written as plainly as possible, to hold the
// tuned one to: filter by value, then a stable sort with the seed's
// byLastUsedAndDetected (Equal and Before rather than Compare) and the ID.
func referenceOrder(images []imageRecord, keep func(imageRecord) bool) []imageRecord {
	var out []imageRecord
	for _, img := range images {
		if keep(img) {
			out = append(out, img)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if !a.lastUsed.Equal(b.lastUsed) {
			return a.lastUsed.Before(b.lastUsed)
		}
		if !a.firstDetected.Equal(b.firstDetected) {
			return a.firstDetected.Before(b.firstDetected)
		}
		return a.id < b.id
	})
	return out
}

// randomRecords draws n images whose times come from a handful of instants
// around now, so that most pairs tie on last use and many on first
// detection too; the instants sit on either side of each boundary the
// filters test. IDs are unique, as they are in the records' map, but share
// long prefixes and differ in length. When base carries a monotonic clock
// reading, as the Manager's clock's do, so do all the non-zero times.
func randomRecords(rng *rand.Rand, n int, base time.Time, minAge, maxAge time.Duration) []imageRecord {
	now := base.Add(48 * time.Hour)
	instants := []time.Time{
		{}, base, base.Add(time.Nanosecond), base.Add(ImageListPeriod),
		now.Add(-maxAge - time.Nanosecond), now.Add(-maxAge), now.Add(-maxAge + ImageListPeriod),
		now.Add(-minAge - time.Nanosecond), now.Add(-minAge), now.Add(-minAge + time.Nanosecond),
		now.Add(-time.Nanosecond), now, now.Add(time.Second),
	}
	// A few instants per set make ties likely whatever n is.
	pool := make([]time.Time, 1+rng.IntN(4))
	for i := range pool {
		pool[i] = instants[rng.IntN(len(instants))]
	}
	pick := func() time.Time { return pool[rng.IntN(len(pool))] }
	pins := []pinReason{"", "", "", "", pinnedSandbox, pinnedConfigured, pinnedByRuntime}
	ids := map[string]bool{}
	out := make([]imageRecord, 0, n)
	for len(out) < n {
		id := fmt.Sprintf("sha256:%0*x", 1+rng.IntN(6), rng.IntN(4*n+16))
		if ids[id] {
			continue
		}
		ids[id] = true
		r := imageRecord{id: id, size: rng.Int64N(1 << 30), firstDetected: pick(), lastUsed: pick(), pin: pins[rng.IntN(len(pins))]}
		if rng.IntN(10) == 0 {
			r.inUse, r.lastUsed = true, now
		}
		out = append(out, r)
	}
	return out
}

func TestEvictionOrderMatchesReference(t *testing.T) {
	minAge, maxAge := 2*time.Minute, time.Hour
	rng := rand.New(rand.NewPCG(7, 11))
	sets := 0
	check := func(t *testing.T, images []imageRecord, now, began time.Time) {
		t.Helper()
		sets++
		before := slices.Clone(images)
		got := chooseImagesToFree(images, now, minAge)
		want := referenceOrder(images, func(img imageRecord) bool { return protection(img, now, minAge) == "" })
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("chooseImagesToFree over %d images:\n got %q\nwant %q", len(images), ids(got), ids(want))
		}
		got = maxAgeVictims(images, now, began, maxAge)
		want = referenceOrder(images, func(img imageRecord) bool {
			return !img.inUse && img.pin == "" && overMaxAge(&img, now, began, maxAge)
		})
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("maxAgeVictims over %d images:\n got %q\nwant %q", len(images), ids(got), ids(want))
		}
		if !reflect.DeepEqual(images, before) {
			t.Fatal("the choice changed its input")
		}
	}
	for _, clock := range []struct {
		name string
		base time.Time
	}{
		{"wall clock", t0},
		// time.Now has a monotonic reading, and Compare, Before and Equal
		// then use it.
		{"monotonic clock", time.Now()},
	} {
		t.Run(clock.name, func(t *testing.T) {
			now := clock.base.Add(48 * time.Hour)
			for range 1000 {
				// Past 12 elements the sort stops being an insertion sort.
				n := rng.IntN(40)
				if rng.IntN(4) == 0 {
					n = 40 + rng.IntN(300)
				}
				check(t, randomRecords(rng, n, clock.base, minAge, maxAge), now, clock.base)
			}
		})
	}
	node := newBenchGCNode(10000)
	check(t, node.records, node.now, node.began)
	t.Logf("%d record sets", sets)
}

// TestCollectable holds the filter chooseImagesToFree uses to protection,
// whose reasons the verdicts show.
func TestCollectable(t *testing.T) {
	minAge, maxAge := 2*time.Minute, time.Hour
	rng := rand.New(rand.NewPCG(3, 5))
	for _, base := range []time.Time{t0, time.Now()} {
		now := base.Add(48 * time.Hour)
		for _, img := range randomRecords(rng, 5000, base, minAge, maxAge) {
			for _, age := range []time.Duration{0, minAge} {
				if got, want := collectable(&img, now, age), protection(img, now, age) == ""; got != want {
					t.Errorf("collectable(%+v, minAge %s) = %t, but protection says %q", img, age, got, protection(img, now, age))
				}
			}
		}
	}
}

// TestEvictionOrderSameAsSortingRecords covers what the reference cannot:
// records that tie on every key, which the runtime never reports but a
// caller could pass. Sorting pointers makes the comparisons and swaps that
// sorting the records made, so even their order is the one the records'
// own sort gave.
func TestEvictionOrderSameAsSortingRecords(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 17))
	for range 200 {
		images := randomRecords(rng, 1+rng.IntN(200), t0, 0, time.Hour)
		for i := range images {
			if rng.IntN(3) == 0 {
				twin := images[rng.IntN(len(images))]
				images[i].id, images[i].lastUsed, images[i].firstDetected = twin.id, twin.lastUsed, twin.firstDetected
			}
		}
		want := slices.Clone(images)
		slices.SortFunc(want, func(a, b imageRecord) int {
			return cmp.Or(a.lastUsed.Compare(b.lastUsed), a.firstDetected.Compare(b.firstDetected), cmp.Compare(a.id, b.id))
		})
		got := inEvictionOrder(images, func(*imageRecord) bool { return true })
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("over %d images, by ID and size:\n got %v\nwant %v", len(images), idSizes(got), idSizes(want))
		}
	}
}

func idSizes(records []imageRecord) []string {
	var out []string
	for _, r := range records {
		out = append(out, fmt.Sprintf("%s/%d", r.id, r.size))
	}
	return out
}
