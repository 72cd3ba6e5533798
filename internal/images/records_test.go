package images

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestObserve(t *testing.T) {
	t1, t2 := t0.Add(time.Minute), t0.Add(2*time.Minute)
	none := pins{sandbox: newRefSet(), configured: newRefSet()}
	tests := []struct {
		name       string
		before     map[string]*imageRecord
		images     []*runtimeapi.Image
		inUse      []string
		pinned     pins
		detectTime time.Time
		want       map[string]*imageRecord
	}{
		{
			name:       "new images are detected at detectTime, the zero time on the first detection",
			images:     []*runtimeapi.Image{image('a', 10, "docker.io/library/a:1"), image('b', 20)},
			detectTime: time.Time{},
			want: map[string]*imageRecord{
				id('a'): {id: id('a'), tags: []string{"docker.io/library/a:1"}, size: 10},
				id('b'): {id: id('b'), size: 20},
			},
		},
		{
			name:       "a known image keeps its first detection; a new one gets detectTime",
			before:     map[string]*imageRecord{id('a'): {id: id('a'), size: 10, firstDetected: t0}},
			images:     []*runtimeapi.Image{image('a', 10), image('b', 20)},
			detectTime: t1,
			want: map[string]*imageRecord{
				id('a'): {id: id('a'), size: 10, firstDetected: t0},
				id('b'): {id: id('b'), size: 20, firstDetected: t1},
			},
		},
		{
			name:       "an image in use is marked used now; one no longer in use keeps its last use",
			before:     map[string]*imageRecord{id('a'): {id: id('a'), size: 10, lastUsed: t0, inUse: true}, id('b'): {id: id('b'), size: 20, lastUsed: t0, inUse: true}},
			images:     []*runtimeapi.Image{image('a', 10, "docker.io/library/a:1"), image('b', 20)},
			inUse:      []string{"a:1"},
			detectTime: t1,
			want: map[string]*imageRecord{
				id('a'): {id: id('a'), tags: []string{"docker.io/library/a:1"}, size: 10, lastUsed: t2, inUse: true},
				id('b'): {id: id('b'), size: 20, lastUsed: t0},
			},
		},
		{
			name:       "records of images the runtime no longer has are dropped",
			before:     map[string]*imageRecord{id('a'): {id: id('a'), size: 10}, id('b'): {id: id('b'), size: 20}},
			images:     []*runtimeapi.Image{image('b', 20)},
			detectTime: t1,
			want:       map[string]*imageRecord{id('b'): {id: id('b'), size: 20}},
		},
		{
			name:       "sizes, names and pinning are refreshed",
			before:     map[string]*imageRecord{id('a'): {id: id('a'), tags: []string{"docker.io/library/old:1"}, size: 10, pin: pinnedByRuntime}},
			images:     []*runtimeapi.Image{{Id: id('a'), Size: 15, RepoTags: []string{"berth.local/pause:3.10"}, RepoDigests: []string{"berth.local/pause@sha256:" + id('c')[7:]}}},
			pinned:     pins{sandbox: newRefSet("berth.local/pause:3.10"), configured: newRefSet()},
			detectTime: t1,
			want: map[string]*imageRecord{id('a'): {id: id('a'), tags: []string{"berth.local/pause:3.10"},
				digests: []string{"berth.local/pause@sha256:" + id('c')[7:]}, size: 15, pin: pinnedSandbox}},
		},
		{
			name:       "images without an ID are ignored",
			images:     []*runtimeapi.Image{{Size: 5}, nil},
			detectTime: t1,
			want:       map[string]*imageRecord{},
		},
		{
			name:       "nothing listed drops every record",
			before:     map[string]*imageRecord{id('a'): {id: id('a')}},
			detectTime: t1,
			want:       map[string]*imageRecord{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			records := map[string]*imageRecord{}
			for k, r := range tt.before {
				c := *r
				records[k] = &c
			}
			p := tt.pinned
			if p.sandbox == nil {
				p = none
			}
			observe(records, tt.images, newRefSet(tt.inUse...), p, tt.detectTime, t2)
			if !reflect.DeepEqual(records, tt.want) {
				for k, r := range records {
					t.Logf("got %s: %+v", k, *r)
				}
				t.Errorf("records differ from %v", tt.want)
			}
		})
	}
}

// The manager's periodic detection records images found by its first
// successful run at the zero time and later ones at the time they appear; a
// GC's detection records new images at the GC's time.
func TestDetectionTimes(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, DefaultPolicy(), image('a', 10))
	e.rt.Fail("ListImages", errors.New("runtime down"))
	if err := e.m.detectImages(ctx, time.Time{}, true); err == nil {
		t.Fatal("detection succeeded with the runtime down")
	}
	e.rt.Fail("ListImages", nil)
	e.clk.Step(time.Minute)
	e.detect(t) // the first that succeeds
	if got := e.record(t, id('a')).firstDetected; !got.IsZero() {
		t.Errorf("image present at the first detection: firstDetected = %v, want the zero time", got)
	}
	e.clk.Step(time.Minute)
	e.rt.AddImages(image('b', 20))
	e.detect(t)
	if got, want := e.record(t, id('b')).firstDetected, t0.Add(2*time.Minute); !got.Equal(want) {
		t.Errorf("image appearing later: firstDetected = %v, want %v", got, want)
	}
	e.clk.Step(time.Minute)
	e.rt.AddImages(image('c', 30))
	if err := e.m.GarbageCollect(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := e.record(t, id('c')).firstDetected, t0.Add(3*time.Minute); !got.Equal(want) {
		t.Errorf("image found by a GC: firstDetected = %v, want %v", got, want)
	}
}

// When the runtime cannot say what is in use, the detection fails and the
// records stay as they were.
func TestDetectionInUseFailureKeepsRecords(t *testing.T) {
	e := newEnv(t, DefaultPolicy(), image('a', 10))
	e.detect(t)
	before := e.record(t, id('a'))
	e.rt.AddImages(image('b', 20))
	e.node.set(func(n *fakeNode) { n.inUseErr = errors.New("cannot list containers") })
	err := e.m.detectImages(context.Background(), time.Time{}, true)
	if err == nil {
		t.Fatal("detection succeeded without images in use")
	}
	if got := e.m.snapshot(); len(got) != 1 || !reflect.DeepEqual(got[0], before) {
		t.Errorf("records after a failed detection = %+v, want only %+v", got, before)
	}
}
