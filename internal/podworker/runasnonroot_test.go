package podworker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/testing/fakecri"
	"github.com/berth-dev/berth/internal/volume"
)

var _ Runtime = (*fakecri.Runtime)(nil)

// userRuntime knows one image, "busybox", whose record carries the user
// under test, and has the sandbox "sb". statusErr fails ImageStatus by
// image ID, i.e. the read of the image's user after the pull step found
// the image by name.
func userRuntime(image *runtimeapi.Image, statusErr error) *fakecri.Runtime {
	rt := fakecri.New(nil)
	image.RepoTags = []string{"busybox"}
	rt.AddImages(image)
	rt.AddSandbox(&runtimeapi.PodSandbox{Id: "sb", State: runtimeapi.PodSandboxState_SANDBOX_READY}, "")
	if statusErr != nil {
		rt.Fail("ImageStatus "+image.Id, statusErr)
	}
	return rt
}

// created are the configs of the containers rt created.
func created(rt *fakecri.Runtime) []*runtimeapi.ContainerConfig {
	var out []*runtimeapi.ContainerConfig
	for _, id := range rt.Containers() {
		out = append(out, rt.ContainerConfig(id))
	}
	return out
}

// hostVolumes is a volume host in a temporary directory; setupErr fails
// Setup.
type hostVolumes struct {
	Volumes
	dir      string
	setupErr error
}

func (h *hostVolumes) Setup(context.Context, *v1.Pod, volume.SetupOptions) (map[string]string, error) {
	return map[string]string{}, h.setupErr
}

func (h *hostVolumes) WriteHostsFile(types.UID, []byte) (string, error) {
	return filepath.Join(h.dir, "hosts"), nil
}

func (h *hostVolumes) ContainerDir(types.UID, string) string { return h.dir }

// Starting a container reads its image's user from the runtime and holds
// back one that runAsNonRoot forbids with the kubelet's waiting reason,
// message and Warning Failed event, never creating it; any other error of
// building the config gets the same reason and event.
func TestStartContainerRunAsNonRoot(t *testing.T) {
	const (
		rootMsg  = `container has runAsNonRoot and image will run as root (pod: "web_default(u1)", container: app)`
		userMsg  = `container's runAsUser breaks non-root policy (pod: "web_default(u1)", container: app)`
		namedMsg = `container has runAsNonRoot and image has non-numeric user (nobody), cannot verify user is non-root (pod: "web_default(u1)", container: app)`
	)
	uid := func(v int64) *runtimeapi.Int64Value { return &runtimeapi.Int64Value{Value: v} }
	nonRoot := &v1.SecurityContext{RunAsNonRoot: ptrTo(true)}
	tests := []struct {
		name      string
		sc        *v1.SecurityContext
		image     *runtimeapi.Image
		statusErr error
		policy    v1.PullPolicy // IfNotPresent if empty
		setupErr  error
		wantMsg   string // "" when the container is created
		wantUID   *int64 // the CRI runAsUser of a created container
		wantName  string // its runAsUsername
	}{
		{name: "no user is root", sc: nonRoot, image: &runtimeapi.Image{}, wantMsg: rootMsg},
		{name: "uid 0", sc: nonRoot, image: &runtimeapi.Image{Uid: uid(0)}, wantMsg: rootMsg},
		{name: "user name", sc: nonRoot, image: &runtimeapi.Image{Username: "nobody"}, wantMsg: namedMsg},
		{name: "runAsUser 0", sc: &v1.SecurityContext{RunAsNonRoot: ptrTo(true), RunAsUser: ptrTo(int64(0))},
			image: &runtimeapi.Image{Uid: uid(1000)}, wantMsg: userMsg},
		{name: "uid 1000", sc: nonRoot, image: &runtimeapi.Image{Uid: uid(1000)}, wantUID: ptrTo(int64(1000))},
		{name: "runAsUser 1000 over root", sc: &v1.SecurityContext{RunAsNonRoot: ptrTo(true), RunAsUser: ptrTo(int64(1000))},
			image: &runtimeapi.Image{}, wantUID: ptrTo(int64(1000))},
		// Without runAsNonRoot a root image runs, as uid 0 said outright.
		{name: "not asked", image: &runtimeapi.Image{}, wantUID: ptrTo(int64(0))},
		{name: "named user not asked", image: &runtimeapi.Image{Username: "nobody"}, wantName: "nobody"},
		// The record ensureImage read is the one the user comes from; a
		// pulled image whose record could not be read after the pull is
		// read again, and that failing holds the container back.
		{name: "image status fails after a pull", image: &runtimeapi.Image{}, statusErr: errors.New("runtime gone"),
			policy: v1.PullAlways, wantMsg: `reading the user of image "busybox": runtime gone`},
		{name: "volume setup fails", image: &runtimeapi.Image{}, setupErr: errors.New("no space"), wantMsg: "no space"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.image.Id = "sha256:busybox"
			rt := userRuntime(tt.image, tt.statusErr)
			w, events := startTestWorker(t, rt, &hostVolumes{dir: t.TempDir(), setupErr: tt.setupErr})
			pod := &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"},
				Spec: v1.PodSpec{Containers: []v1.Container{{
					Name: "app", Image: "busybox", ImagePullPolicy: v1.PullIfNotPresent, SecurityContext: tt.sc,
				}}},
			}
			c := &pod.Spec.Containers[0]
			if tt.policy != "" {
				c.ImagePullPolicy = tt.policy
			}
			ex := &execution{w: w, pod: pod, st: &container.PodStatus{}, sandboxID: "sb", log: w.ws.deps.Log}
			retry := ex.startContainer(context.Background(), c, false)

			if tt.wantMsg != "" {
				if retry != retryAfterError || len(created(rt)) != 0 {
					t.Fatalf("retry %v, created %d containers; want a retry in %v and none", retry, len(created(rt)), retryAfterError)
				}
				got := w.waiting["app"]
				if got.Reason != reasonCreateConfigError || got.Message != tt.wantMsg {
					t.Errorf("waiting = %+v, want %s: %s", got, reasonCreateConfigError, tt.wantMsg)
				}
				if want := "Warning Failed Error: " + tt.wantMsg; !slices.Contains(*events, want) {
					t.Errorf("events %q lack %q", *events, want)
				}
				return
			}
			if retry != 0 || len(created(rt)) != 1 {
				t.Fatalf("retry %v, created %d containers, waiting %+v; want it started", retry, len(created(rt)), w.waiting)
			}
			// The user comes from the record ensureImage read: one
			// ImageStatus, where the kubelet asks twice.
			if got := rt.CallsOf("ImageStatus"); len(got) != 1 {
				t.Errorf("ImageStatus calls %q, want one", got)
			}
			sc := created(rt)[0].GetLinux().GetSecurityContext()
			var gotUID *int64
			if sc.GetRunAsUser() != nil {
				gotUID = &sc.RunAsUser.Value
			}
			if (gotUID == nil) != (tt.wantUID == nil) || (gotUID != nil && *gotUID != *tt.wantUID) || sc.GetRunAsUsername() != tt.wantName {
				t.Errorf("runAsUser %v, runAsUsername %q; want %v, %q", sc.GetRunAsUser(), sc.GetRunAsUsername(), tt.wantUID, tt.wantName)
			}
			for _, e := range *events {
				if strings.HasPrefix(e, "Warning") {
					t.Errorf("unexpected event %q", e)
				}
			}
		})
	}
}

func startTestWorker(t *testing.T, rt Runtime, vols Volumes) (*worker, *recordedEvents) {
	t.Helper()
	events := &recordedEvents{}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ws := NewWorkers(ctx, Deps{
		Runtime: rt,
		Volumes: vols,
		Events:  events,
		Clock:   testingclock.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)),
		Log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	return newWorker(ws, "u1", "web", "default"), events
}

func ptrTo[T any](v T) *T { return &v }
