package csi

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"k8s.io/apimachinery/pkg/types"
)

func TestBadNames(t *testing.T) {
	e := newEnv(t, time.Minute)
	d := e.driver(t, "ok.csi.test")
	register(t, e.m, d)
	ctx := context.Background()
	for _, name := range []string{"", ".", "..", "a/../../b"} {
		if err := e.m.Handler().ValidatePlugin(name, "/x.sock", []string{"1.0.0"}); err == nil {
			t.Errorf("driver name %q validated", name)
		}
		if _, err := e.m.Stage(ctx, StageRequest{Driver: name, VolumeHandle: "h"}); err == nil {
			t.Errorf("Stage with driver %q", name)
		}
	}
	for _, tc := range []struct{ uid, vol string }{{"", "v"}, {"..", "v"}, {"a/b", "v"}, {"u", ""}, {"u", ".."}, {"u", "."}} {
		r := pvPublish(d.name)
		r.Pod.UID, r.VolumeName = tc.uid, tc.vol
		if _, err := e.m.Publish(ctx, r); err == nil {
			t.Errorf("Publish of pod %q volume %q", tc.uid, tc.vol)
		}
		if _, err := e.m.Unpublish(ctx, types.UID(tc.uid), tc.vol); err == nil {
			t.Errorf("Unpublish of pod %q volume %q", tc.uid, tc.vol)
		}
		if _, err := e.m.Stats(ctx, types.UID(tc.uid), tc.vol); err == nil {
			t.Errorf("Stats of pod %q volume %q", tc.uid, tc.vol)
		}
	}
	if d.count("NodePublishVolume") != 0 || len(mustList(t, e.root)) != 0 {
		t.Errorf("bad names reached the driver or the disk: %v, %v", d.callList(), mustList(t, e.root))
	}
	if _, err := e.m.Stats(ctx, podUID, "never-published"); err == nil || !strings.Contains(err.Error(), "not published") {
		t.Errorf("Stats of an unpublished volume: %v", err)
	}
}

func mustList(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// A publish that timed out may still happen in the driver: its record
// stays and Unpublish asks the driver, so nothing is leaked.
func TestHungPublishIsTornDown(t *testing.T) {
	e := newEnv(t, 300*time.Millisecond)
	d := e.driver(t, "hang.csi.test")
	d.hang["NodePublishVolume"] = true
	register(t, e.m, d)
	ctx := context.Background()
	_, err := e.m.Publish(ctx, pvPublish(d.name))
	checkOpError(t, err, "NodePublishVolume", d.name, volHandle, codes.DeadlineExceeded, true)
	rec, err := Reconstruct(e.root, e.mounts)
	if err != nil || len(rec.Published) != 1 || rec.Published[0].Mounted {
		t.Fatalf("Reconstruct = %+v, %v; want the volume, not mounted", rec, err)
	}
	r, err := e.m.Unpublish(ctx, podUID, pvName)
	if err != nil || !r.Called {
		t.Fatalf("Unpublish = %+v, %v", r, err)
	}
	if rec, _ := Reconstruct(e.root, e.mounts); len(rec.Published) != 0 {
		t.Errorf("still there: %+v", rec)
	}
	// An unpublish that fails keeps the record for the next try.
	d.mu.Lock()
	d.hang["NodePublishVolume"] = false
	d.fail["NodeUnpublishVolume"] = fmt.Errorf("plain error")
	d.mu.Unlock()
	if _, err := e.m.Publish(ctx, pvPublish(d.name)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Unpublish(ctx, podUID, pvName); err == nil {
		t.Fatal("failed unpublish reported done")
	}
	if rec, _ := Reconstruct(e.root, e.mounts); len(rec.Published) != 1 || !rec.Published[0].Mounted {
		t.Errorf("after a failed unpublish: %+v", rec)
	}
}

// Operations on different volumes run concurrently with registrations of
// other drivers (go test -race).
func TestConcurrentOperations(t *testing.T) {
	e := newEnv(t, time.Minute)
	d := e.driver(t, "stage.csi.test", rpcStage, rpcStats)
	other := e.driver(t, "other.csi.test")
	register(t, e.m, d)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			handle := fmt.Sprintf("vol-%d", i)
			uid := types.UID(fmt.Sprintf("pod-%d", i))
			r := pvPublish(d.name)
			r.VolumeHandle, r.Pod.UID, r.VolumeName = handle, string(uid), "pv-"+handle
			steps := []func() error{
				func() error { _, err := e.m.Stage(ctx, StageRequest{Driver: d.name, VolumeHandle: handle}); return err },
				func() error { _, err := e.m.Publish(ctx, r); return err },
				func() error { _, err := e.m.Stats(ctx, uid, r.VolumeName); return err },
				func() error { _, err := e.m.Unpublish(ctx, uid, r.VolumeName); return err },
				func() error { _, err := e.m.Unstage(ctx, d.name, handle); return err },
			}
			for _, s := range steps {
				if err := s(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 5 {
			if err := e.m.Handler().RegisterPlugin(ctx, other.name, other.socket, []string{"1.0.0"}); err != nil {
				errs <- err
				return
			}
			e.m.Handler().DeRegisterPlugin(ctx, other.name, other.socket)
			_ = e.m.Drivers()
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if rec, err := Reconstruct(e.root, e.mounts); err != nil || len(rec.Published)+len(rec.Staged)+len(rec.Problems) != 0 {
		t.Errorf("left behind: %+v, %v", rec, err)
	}
}

func TestReconstructStagedProblems(t *testing.T) {
	root := t.TempDir()
	mounts := newFakeMounts()
	good := StagingDir(root, "d.csi.test", "h1")
	if err := writeVolData(good, VolData{DriverName: "d.csi.test", VolumeHandle: "h1"}, globalMountDir); err != nil {
		t.Fatal(err)
	}
	// A record in the dir of another handle, a corrupt one, one missing,
	// and the kubelet's block volume dir, which is not berth's.
	moved := StagingDir(root, "d.csi.test", "h2")
	if err := writeVolData(moved, VolData{DriverName: "d.csi.test", VolumeHandle: "h3"}, globalMountDir); err != nil {
		t.Fatal(err)
	}
	corrupt := StagingDir(root, "d.csi.test", "h4")
	os.MkdirAll(corrupt, 0o750)
	os.WriteFile(filepath.Join(corrupt, volDataFileName), []byte("{{"), 0o640)
	missing := StagingDir(root, "d.csi.test", "h5")
	os.MkdirAll(missing, 0o750)
	os.MkdirAll(filepath.Join(root, "plugins", PluginName, "volumeDevices", "pv1", "dev"), 0o750)

	rec, err := Reconstruct(root, mounts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Staged) != 1 || rec.Staged[0].Data.VolumeHandle != "h1" || rec.Staged[0].Mounted {
		t.Errorf("Staged = %+v", rec.Staged)
	}
	all := fmt.Sprint(rec.Problems)
	for _, want := range []string{moved, corrupt, missing} {
		if !strings.Contains(all, want) {
			t.Errorf("problems %v do not name %s", rec.Problems, want)
		}
	}
	if len(rec.Problems) != 3 || strings.Contains(all, "volumeDevices") {
		t.Errorf("problems = %v", rec.Problems)
	}
	// Nothing there at all is no error.
	if rec, err := Reconstruct(filepath.Join(root, "absent"), nil); err != nil || len(rec.Problems) != 0 {
		t.Errorf("empty root = %+v, %v", rec, err)
	}
}
