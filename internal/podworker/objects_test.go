package podworker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/status"
	"github.com/berth-dev/berth/internal/volume"
)

// fakeObjects serves configMaps and secrets from maps; a name in fail
// answers that error instead.
type fakeObjects struct {
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]*v1.Secret
	fail       map[string]error
}

func (f *fakeObjects) GetConfigMap(_ context.Context, _, name string) (*v1.ConfigMap, error) {
	if err := f.fail[name]; err != nil {
		return nil, err
	}
	if cm, ok := f.configMaps[name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmap"}, name)
}

func (f *fakeObjects) GetSecret(_ context.Context, _, name string) (*v1.Secret, error) {
	if err := f.fail[name]; err != nil {
		return nil, err
	}
	if s, ok := f.secrets[name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secret"}, name)
}

func (f *fakeObjects) GetServiceAccountToken(context.Context, string, string, *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	return nil, errors.New("no tokens here")
}

// recordedEvents keeps the events a worker records.
type recordedEvents []string

func (r *recordedEvents) Event(_ *v1.Pod, eventType, reason, message string) {
	*r = append(*r, eventType+" "+reason+" "+message)
}

// fakePuller records pulls; it fails for the credentials in bad. It
// implements only the Runtime methods a pull uses.
type fakePuller struct {
	Runtime
	pulls []string
	bad   map[string]bool
}

func (f *fakePuller) PullImage(_ context.Context, image string, _ *runtimeapi.PodSandboxConfig) (string, error) {
	f.pulls = append(f.pulls, "anonymous")
	return "sha256:anon", nil
}

func (f *fakePuller) PullImageWithAuth(_ context.Context, image string, auth *runtimeapi.AuthConfig, _ *runtimeapi.PodSandboxConfig) (string, error) {
	f.pulls = append(f.pulls, auth.Username)
	if f.bad[auth.Username] {
		return "", errors.New("401 for " + auth.Username)
	}
	return "sha256:" + auth.Username, nil
}

// anonymousOnly is a runtime client that cannot pass credentials.
type anonymousOnly struct{ Runtime }

func testWorker(deps Deps) (*worker, *recordedEvents) {
	events := &recordedEvents{}
	deps.Events = events
	deps.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	return &worker{ws: &Workers{deps: deps}, waiting: map[string]status.Waiting{}}, events
}

func pullSecret(name, registry, user string) *v1.Secret {
	return &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Type:       v1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(
			`{"auths":{"` + registry + `":{"username":"` + user + `","password":"pw"}}}`)},
	}
}

func TestPullCredentials(t *testing.T) {
	objs := &fakeObjects{
		secrets: map[string]*v1.Secret{
			"first":  pullSecret("first", "registry.example.com", "alice"),
			"second": pullSecret("second", "registry.example.com", "bob"),
			"hub":    pullSecret("hub", "https://index.docker.io/v1/", "carol"),
			"broken": {ObjectMeta: metav1.ObjectMeta{Name: "broken"}, Type: v1.SecretTypeDockerConfigJson,
				Data: map[string][]byte{v1.DockerConfigJsonKey: []byte("{")}},
		},
		fail: map[string]error{"forbidden": apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "forbidden", errors.New("no"))},
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "web"}, Spec: v1.PodSpec{ImagePullSecrets: []v1.LocalObjectReference{
		{Name: "first"}, {Name: ""}, {Name: "missing"}, {Name: "forbidden"}, {Name: "second"}, {Name: "hub"},
	}}}
	w, events := testWorker(Deps{Objects: objs})
	log := w.ws.deps.Log
	creds, err := w.pullCredentials(context.Background(), pod, "registry.example.com/app:1", log)
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, c := range creds {
		users = append(users, c.Username)
	}
	if want := []string{"alice", "bob"}; !reflect.DeepEqual(users, want) {
		t.Errorf("credentials for users %v, want %v", users, want)
	}
	if len(*events) != 1 || !strings.Contains((*events)[0],
		"Warning FailedToRetrieveImagePullSecret Unable to retrieve some image pull secrets (missing, forbidden)") {
		t.Errorf("events = %v", *events)
	}
	if creds, _ := w.pullCredentials(context.Background(), pod, "busybox", log); len(creds) != 1 || creds[0].Username != "carol" {
		t.Errorf("Docker Hub credentials = %v", creds)
	}
	if creds, _ := w.pullCredentials(context.Background(), pod, "elsewhere.example.org/app", log); creds != nil {
		t.Errorf("credentials for an unknown registry: %v", creds)
	}

	pod.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "broken"}}
	if _, err := w.pullCredentials(context.Background(), pod, "busybox", log); err == nil || !strings.Contains(err.Error(), `secret "broken"`) {
		t.Errorf("a broken pull secret: %v", err)
	}
	// Standalone: no source, no credentials, no error.
	w, _ = testWorker(Deps{})
	if creds, err := w.pullCredentials(context.Background(), pod, "busybox", log); creds != nil || err != nil {
		t.Errorf("standalone: %v, %v", creds, err)
	}
}

func TestPullWithCredentials(t *testing.T) {
	auth := func(users ...string) []*runtimeapi.AuthConfig {
		var out []*runtimeapi.AuthConfig
		for _, u := range users {
			out = append(out, &runtimeapi.AuthConfig{Username: u})
		}
		return out
	}
	for _, tt := range []struct {
		name      string
		creds     []*runtimeapi.AuthConfig
		bad       map[string]bool
		wantRef   string
		wantPulls []string
		wantErr   string
	}{
		{name: "no credentials: anonymous", wantRef: "sha256:anon", wantPulls: []string{"anonymous"}},
		{name: "first credential works", creds: auth("a", "b"), wantRef: "sha256:a", wantPulls: []string{"a"}},
		{name: "falls through to the next", creds: auth("a", "b"), bad: map[string]bool{"a": true}, wantRef: "sha256:b", wantPulls: []string{"a", "b"}},
		{name: "all fail: no anonymous try, every error", creds: auth("a", "b"), bad: map[string]bool{"a": true, "b": true},
			wantPulls: []string{"a", "b"}, wantErr: "401 for a\n401 for b"},
	} {
		rt := &fakePuller{bad: tt.bad}
		w, _ := testWorker(Deps{Runtime: rt})
		ref, err := w.pullWithCredentials(context.Background(), "registry.example.com/app", tt.creds, nil)
		if tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr) || tt.wantErr == "" && err != nil {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.wantErr)
		}
		if ref != tt.wantRef || !reflect.DeepEqual(rt.pulls, tt.wantPulls) {
			t.Errorf("%s: ref %q after pulls %v; want %q after %v", tt.name, ref, rt.pulls, tt.wantRef, tt.wantPulls)
		}
	}
	w, _ := testWorker(Deps{Runtime: anonymousOnly{}})
	if _, err := w.pullWithCredentials(context.Background(), "registry.example.com/app", auth("a"), nil); err == nil ||
		!strings.Contains(err.Error(), "cannot pass credentials") {
		t.Errorf("a runtime without credentials support: %v", err)
	}
}

func TestEnvObjects(t *testing.T) {
	objs := &fakeObjects{
		configMaps: map[string]*v1.ConfigMap{"settings": {Data: map[string]string{"k": "v"}}},
		secrets:    map[string]*v1.Secret{"creds": {Data: map[string][]byte{"p": []byte("pw")}}},
		fail:       map[string]error{"flaky": errors.New("connection refused")},
	}
	ref := func(name string) v1.LocalObjectReference { return v1.LocalObjectReference{Name: name} }
	c := &v1.Container{Name: "app",
		EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: ref("settings")}}},
		Env: []v1.EnvVar{
			{Name: "P", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: ref("creds"), Key: "p"}}},
			{Name: "A", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: ref("absent"), Key: "k"}}},
		},
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "prod"}}
	w, _ := testWorker(Deps{Objects: objs})
	got, err := w.envObjects(context.Background(), pod, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.ConfigMaps) != 1 || got.ConfigMaps["settings"] == nil || len(got.Secrets) != 1 || got.Secrets["creds"] == nil {
		t.Errorf("objects = %+v; want settings and creds, absent left out", got)
	}
	c.Env = append(c.Env, v1.EnvVar{Name: "F", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: ref("flaky"), Key: "k"}}})
	if _, err := w.envObjects(context.Background(), pod, c); err == nil || !strings.Contains(err.Error(), `container "app": connection refused`) {
		t.Errorf("a failed read: %v", err)
	}
	w, _ = testWorker(Deps{})
	if got, err := w.envObjects(context.Background(), pod, c); got != nil || err != nil {
		t.Errorf("standalone: %v, %v", got, err)
	}
}

// fakeVolumes counts Setup calls and can fail them.
type fakeVolumes struct {
	Volumes
	setups int
	err    error
}

func (f *fakeVolumes) Setup(context.Context, *v1.Pod, volume.SetupOptions) (map[string]string, error) {
	f.setups++
	return nil, f.err
}

func TestRefreshVolumes(t *testing.T) {
	apiPod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: types.UID("u1")}, Spec: v1.PodSpec{Volumes: []v1.Volume{
		{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}},
	}}}
	diskPod := &v1.Pod{Spec: v1.PodSpec{Volumes: []v1.Volume{{Name: "d", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}}}
	running := &container.PodStatus{Containers: []container.ContainerStatus{{Name: "app", State: container.StateRunning}}}
	exited := &container.PodStatus{Containers: []container.ContainerStatus{{Name: "app", State: container.StateExited}}}
	idle := Plan{SandboxID: "sb"}
	clk := testingclock.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	for _, tt := range []struct {
		name string
		pod  *v1.Pod
		st   *container.PodStatus
		plan Plan
		want int
	}{
		{"running pod with API volumes", apiPod, running, idle, 1},
		{"only disk volumes", diskPod, running, idle, 0},
		{"nothing running", apiPod, exited, idle, 0},
		{"while another container (re)starts", apiPod, running, Plan{Start: []int{1}}, 1},
		{"a new sandbox", apiPod, running, Plan{CreateSandbox: true}, 0},
		{"the pod is killed", apiPod, running, Plan{KillPod: true}, 0},
	} {
		vols := &fakeVolumes{}
		w, _ := testWorker(Deps{Volumes: vols, Clock: clk})
		w.refreshVolumes(context.Background(), tt.pod, tt.st, tt.plan, w.ws.deps.Log)
		if vols.setups != tt.want {
			t.Errorf("%s: %d setups, want %d", tt.name, vols.setups, tt.want)
		}
	}

	// A failure is a FailedMount event; the next try waits for the period,
	// however often the pod syncs meanwhile.
	vols := &fakeVolumes{err: errors.New(`volume "cfg": configmap "settings" not found`)}
	w, events := testWorker(Deps{Volumes: vols, Clock: clk})
	refresh := func() { w.refreshVolumes(context.Background(), apiPod, running, idle, w.ws.deps.Log) }
	refresh()
	if len(*events) != 1 || (*events)[0] != `Warning FailedMount MountVolume.SetUp failed: volume "cfg": configmap "settings" not found` {
		t.Errorf("events = %v", *events)
	}
	clk.Step(volumeRefreshPeriod - time.Second)
	refresh()
	if vols.setups != 1 {
		t.Errorf("%d setups within the period, want 1", vols.setups)
	}
	clk.Step(time.Second)
	refresh()
	if vols.setups != 2 {
		t.Errorf("%d setups once the period is over, want 2", vols.setups)
	}
}
