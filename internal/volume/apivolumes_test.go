package volume

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// fakeObjects is a podobjects.Source over maps, with a token that tests
// rotate.
type fakeObjects struct {
	mu         sync.Mutex
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]*v1.Secret
	token      string
	tokenErr   error
	requests   []*authenticationv1.TokenRequest
}

func newFakeObjects() *fakeObjects {
	return &fakeObjects{configMaps: map[string]*v1.ConfigMap{}, secrets: map[string]*v1.Secret{}, token: "token-1"}
}

func (f *fakeObjects) GetConfigMap(_ context.Context, ns, name string) (*v1.ConfigMap, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cm, ok := f.configMaps[ns+"/"+name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmap"}, name)
}

func (f *fakeObjects) GetSecret(_ context.Context, ns, name string) (*v1.Secret, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.secrets[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secret"}, name)
}

func (f *fakeObjects) GetServiceAccountToken(_ context.Context, ns, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, tr)
	if f.tokenErr != nil {
		return nil, f.tokenErr
	}
	out := tr.DeepCopy()
	out.Status.Token = f.token + " for " + ns + "/" + name
	return out, nil
}

func (f *fakeObjects) setConfigMap(ns, name string, data map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.configMaps[ns+"/"+name] = &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}

// kubeAPIAccess is the volume the API server adds to every pod.
func kubeAPIAccess() v1.Volume {
	return v1.Volume{Name: "kube-api-access-x7k2p", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		DefaultMode: ptr.To[int32](420),
		Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To[int64](3607), Path: "token"}},
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "namespace",
				FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		},
	}}}
}

func clusterPod(uid string, volumes ...v1.Volume) *v1.Pod {
	pod := testPod(uid, volumes...)
	pod.Namespace = "prod"
	pod.Spec.ServiceAccountName = "default"
	pod.Spec.Containers = []v1.Container{{Name: "app"}}
	return pod
}

func fileMode(t *testing.T, p string) fs.FileMode {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

func TestSetupKubeAPIAccess(t *testing.T) {
	m, root := newTestManager(t)
	objs := newFakeObjects()
	objs.setConfigMap("prod", "kube-root-ca.crt", map[string]string{"ca.crt": "CA1"})
	pod := clusterPod("uid-sa", kubeAPIAccess())
	ctx := context.Background()
	paths, err := m.Setup(ctx, pod, SetupOptions{Objects: objs})
	if err != nil {
		t.Fatal(err)
	}
	dir := paths["kube-api-access-x7k2p"]
	if want := filepath.Join(root, "pods/uid-sa/volumes/kubernetes.io~projected/kube-api-access-x7k2p"); dir != want {
		t.Fatalf("path = %s, want %s", dir, want)
	}
	for name, want := range map[string]string{"token": "token-1 for prod/default", "ca.crt": "CA1", "namespace": "prod"} {
		if got := readVisible(t, dir, name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
		if mode := fileMode(t, filepath.Join(dir, name)); mode.Perm() != 0o644 {
			t.Errorf("%s: mode %v, want 0644", name, mode)
		}
	}
	req := objs.requests[0].Spec
	if *req.ExpirationSeconds != 3607 || req.Audiences != nil || req.BoundObjectRef == nil ||
		*req.BoundObjectRef != (authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: "web", UID: "uid-sa"}) {
		t.Errorf("token request = %+v", req)
	}
	mounts := mountsUnder(t, root)
	if len(mounts) != 1 || mounts[0].Mountpoint != dir || mounts[0].FSType != "tmpfs" {
		t.Fatalf("mounts = %v, want one tmpfs on the volume", mounts)
	}

	// A renewed token and a new CA reach the files at the next Setup.
	objs.token = "token-2"
	objs.setConfigMap("prod", "kube-root-ca.crt", map[string]string{"ca.crt": "CA2"})
	if _, err := m.Setup(ctx, pod, SetupOptions{Objects: objs}); err != nil {
		t.Fatal(err)
	}
	if got := readVisible(t, dir, "token"); got != "token-2 for prod/default" {
		t.Errorf("token after renewal = %q", got)
	}
	if got := readVisible(t, dir, "ca.crt"); got != "CA2" {
		t.Errorf("ca.crt after update = %q", got)
	}
	if n := len(mountsUnder(t, root)); n != 1 {
		t.Errorf("%d mounts after a second Setup, want 1", n)
	}

	// A failed refresh keeps what was there.
	objs.tokenErr = errors.New("apiserver down")
	_, err = m.Setup(ctx, pod, SetupOptions{Objects: objs})
	if err == nil || !strings.Contains(err.Error(), `volume "kube-api-access-x7k2p": service account "default" token: apiserver down`) {
		t.Fatalf("err = %v", err)
	}
	if got := readVisible(t, dir, "token"); got != "token-2 for prod/default" {
		t.Errorf("token after a failed refresh = %q", got)
	}

	if err := m.TearDown(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	if n := len(mountsUnder(t, root)); n != 0 {
		t.Errorf("TearDown left %d mounts", n)
	}
}

func TestSetupConfigMapVolume(t *testing.T) {
	m, root := newTestManager(t)
	objs := newFakeObjects()
	objs.setConfigMap("prod", "settings", map[string]string{"app.conf": "v1", "extra.conf": "x"})
	vol := v1.Volume{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: "settings"}, DefaultMode: ptr.To[int32](0o640)}}}
	pod := clusterPod("uid-cm", vol)
	ctx := context.Background()
	paths, err := m.Setup(ctx, pod, SetupOptions{Objects: objs})
	if err != nil {
		t.Fatal(err)
	}
	dir := paths["cfg"]
	if want := filepath.Join(root, "pods/uid-cm/volumes/kubernetes.io~configmap/cfg"); dir != want {
		t.Errorf("path = %s", dir)
	}
	if got := readVisible(t, dir, "app.conf"); got != "v1" {
		t.Errorf("app.conf = %q", got)
	}
	if mode := fileMode(t, filepath.Join(dir, "extra.conf")); mode.Perm() != 0o640 {
		t.Errorf("mode = %v, want 0640", mode)
	}
	if n := len(mountsUnder(t, root)); n != 0 {
		t.Errorf("a configMap volume is on disk, like the kubelet's; got %d mounts", n)
	}
	// An update, with a key removed.
	objs.setConfigMap("prod", "settings", map[string]string{"app.conf": "v2"})
	if _, err := m.Setup(ctx, pod, SetupOptions{Objects: objs}); err != nil {
		t.Fatal(err)
	}
	if got := readVisible(t, dir, "app.conf"); got != "v2" {
		t.Errorf("app.conf = %q after the update", got)
	}
	if _, err := os.Lstat(filepath.Join(dir, "extra.conf")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("removed key still visible: %v", err)
	}
}

func TestSetupConfigMapAndSecretMissing(t *testing.T) {
	m, _ := newTestManager(t)
	objs := newFakeObjects()
	cmVol := func(name, cm string, optional bool, items ...v1.KeyToPath) v1.Volume {
		return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: cm}, Optional: &optional, Items: items}}}
	}
	secretVol := func(name, secret string, optional bool) v1.Volume {
		return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: secret, Optional: &optional}}}
	}
	ctx := context.Background()

	// Optional and absent: empty volumes.
	paths, err := m.Setup(ctx, clusterPod("uid-opt", cmVol("cfg", "absent", true), secretVol("sec", "absent", true)), SetupOptions{Objects: objs})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"cfg", "sec"} {
		entries, err := os.ReadDir(paths[name])
		if err != nil || len(entries) != 2 {
			t.Errorf("%s: %v, %v; want just its data directory and ..data", name, entries, err)
		}
	}

	// Required: every failing volume named, with its object.
	objs.setConfigMap("prod", "settings", map[string]string{"a": "1"})
	_, err = m.Setup(ctx, clusterPod("uid-req",
		cmVol("cfg", "absent", false), secretVol("sec", "creds", false),
		cmVol("keys", "settings", false, v1.KeyToPath{Key: "b", Path: "b"})), SetupOptions{Objects: objs})
	for _, want := range []string{
		`volume "cfg": configmap "absent" not found`,
		`volume "sec": secret "creds" not found`,
		`volume "keys": configmap references non-existent config key: b`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to contain %q", err, want)
		}
	}
}

func TestSetupSecretVolumeOnTmpfs(t *testing.T) {
	m, root := newTestManager(t)
	objs := newFakeObjects()
	objs.secrets["prod/creds"] = &v1.Secret{Data: map[string][]byte{"password": []byte("pw")}}
	pod := clusterPod("uid-sec", v1.Volume{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{
		SecretName: "creds", DefaultMode: ptr.To[int32](0o400)}}})
	paths, err := m.Setup(context.Background(), pod, SetupOptions{Objects: objs})
	if err != nil {
		t.Fatal(err)
	}
	dir := paths["sec"]
	if want := filepath.Join(root, "pods/uid-sec/volumes/kubernetes.io~secret/sec"); dir != want {
		t.Errorf("path = %s", dir)
	}
	if got := readVisible(t, dir, "password"); got != "pw" {
		t.Errorf("password = %q", got)
	}
	if mode := fileMode(t, filepath.Join(dir, "password")); mode.Perm() != 0o400 {
		t.Errorf("mode = %v", mode)
	}
	if mounts := mountsUnder(t, root); len(mounts) != 1 || mounts[0].FSType != "tmpfs" {
		t.Errorf("mounts = %v, want the secret on tmpfs", mounts)
	}
	if err := m.TearDown(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	if n := len(mountsUnder(t, root)); n != 0 {
		t.Errorf("TearDown left %d mounts", n)
	}
}

func TestSetupDownwardAPIVolumeFollowsLabels(t *testing.T) {
	m, _ := newTestManager(t)
	pod := clusterPod("uid-dw", v1.Volume{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{
		Items: []v1.DownwardAPIVolumeFile{{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}})
	pod.Labels = map[string]string{"app": "web"}
	// No object source: a downwardAPI volume needs none.
	paths, err := m.Setup(context.Background(), pod, SetupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := readVisible(t, paths["info"], "labels"); got != `app="web"` {
		t.Errorf("labels = %q", got)
	}
	pod.Labels["version"] = "2"
	if _, err := m.Setup(context.Background(), pod, SetupOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := readVisible(t, paths["info"], "labels"); got != "app=\"web\"\nversion=\"2\"" {
		t.Errorf("labels after the change = %q", got)
	}
}

func TestSetupProjectedWithoutAPIServer(t *testing.T) {
	m, _ := newTestManager(t)
	ctx := context.Background()
	downwardOnly := v1.Volume{Name: "meta", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
		{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}},
	}}}}
	paths, err := m.Setup(ctx, clusterPod("uid-p1", downwardOnly), SetupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := readVisible(t, paths["meta"], "name"); got != "web" {
		t.Errorf("name = %q", got)
	}
	_, err = m.Setup(ctx, clusterPod("uid-p2", kubeAPIAccess()), SetupOptions{})
	for _, want := range []string{"projected serviceAccountToken needs an API server", "projected configMap needs an API server"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to contain %q", err, want)
		}
	}
	bundle := v1.Volume{Name: "trust", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
		{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Name: ptr.To("roots"), Path: "roots.pem"}},
	}}}}
	_, err = m.Setup(ctx, clusterPod("uid-p3", bundle), SetupOptions{Objects: newFakeObjects()})
	if err == nil || !strings.Contains(err.Error(), `volume "trust": projected clusterTrustBundle is not supported`) {
		t.Errorf("err = %v", err)
	}
	secret := v1.Volume{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "x"}}}
	_, err = m.Setup(ctx, clusterPod("uid-p4", secret), SetupOptions{})
	if err == nil || !strings.Contains(err.Error(), `volume "s": secret volumes need an API server`) {
		t.Errorf("err = %v", err)
	}
}

func TestTokenOwnership(t *testing.T) {
	m, _ := newTestManager(t)
	objs := newFakeObjects()
	objs.setConfigMap("prod", "kube-root-ca.crt", map[string]string{"ca.crt": "CA"})
	ctx := context.Background()
	stat := func(p string) *syscall.Stat_t {
		t.Helper()
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t)
	}

	// One non-root user for every container: the token is that user's, 0600.
	pod := clusterPod("uid-user", kubeAPIAccess())
	pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)}
	paths, err := m.Setup(ctx, pod, SetupOptions{Objects: objs})
	if err != nil {
		t.Fatal(err)
	}
	tok := filepath.Join(paths["kube-api-access-x7k2p"], "token")
	if st := stat(tok); st.Uid != 1000 || st.Mode&0o7777 != 0o600 {
		t.Errorf("token: uid %d mode %o, want 1000 and 0600", st.Uid, st.Mode&0o7777)
	}
	if st := stat(filepath.Join(paths["kube-api-access-x7k2p"], "ca.crt")); st.Uid != 0 || st.Mode&0o7777 != 0o644 {
		t.Errorf("ca.crt: uid %d mode %o, want root's 0644", st.Uid, st.Mode&0o7777)
	}

	// fsGroup: everything the group's and group-readable, the token 0640.
	pod = clusterPod("uid-group", kubeAPIAccess())
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr.To[int64](2000)}
	paths, err = m.Setup(ctx, pod, SetupOptions{Objects: objs})
	if err != nil {
		t.Fatal(err)
	}
	dir := paths["kube-api-access-x7k2p"]
	for name, want := range map[string]uint32{"token": 0o640, "ca.crt": 0o644} {
		if st := stat(filepath.Join(dir, name)); st.Gid != 2000 || st.Mode&0o7777 != want {
			t.Errorf("%s: gid %d mode %o, want 2000 and %o", name, st.Gid, st.Mode&0o7777, want)
		}
	}
	if st := stat(filepath.Join(dir, dataDirName)); st.Gid != 2000 || st.Mode&syscall.S_ISGID == 0 {
		t.Errorf("data directory: gid %d mode %o, want 2000 and setgid", st.Gid, st.Mode&0o7777)
	}
}

func TestFsUserFrom(t *testing.T) {
	withUsers := func(podUser *int64, users ...*int64) *v1.Pod {
		pod := &v1.Pod{}
		if podUser != nil {
			pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: podUser}
		}
		for _, u := range users {
			c := v1.Container{}
			if u != nil {
				c.SecurityContext = &v1.SecurityContext{RunAsUser: u}
			}
			pod.Spec.Containers = append(pod.Spec.Containers, c)
		}
		return pod
	}
	u := ptr.To[int64]
	for _, tt := range []struct {
		name string
		pod  *v1.Pod
		want *int64
	}{
		{"pod level", withUsers(u(1000), nil, nil), u(1000)},
		{"same in every container", withUsers(nil, u(7), u(7)), u(7)},
		{"container overrides the pod", withUsers(u(1000), u(7), u(7)), u(7)},
		{"one container without a user", withUsers(nil, u(7), nil), nil},
		{"different users", withUsers(nil, u(7), u(8)), nil},
		{"nobody sets one", withUsers(nil, nil), nil},
	} {
		got := fsUserFrom(tt.pod)
		if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	pod := withUsers(u(1000), nil)
	pod.Spec.InitContainers = []v1.Container{{SecurityContext: &v1.SecurityContext{RunAsUser: u(0)}}}
	if got := fsUserFrom(pod); got != nil {
		t.Errorf("an init container of another user: %v", *got)
	}
}

func TestNeedsRefresh(t *testing.T) {
	if NeedsRefresh(testPod("u", emptyDirVolume("a", "", ""), hostPathVolume("h", "/srv", v1.HostPathUnset))) {
		t.Error("emptyDir and hostPath need no refresh")
	}
	if !NeedsRefresh(testPod("u", emptyDirVolume("a", "", ""), kubeAPIAccess())) {
		t.Error("a projected volume needs refreshing")
	}
	if !NeedsRefresh(testPod("u", claimVol("data"))) {
		t.Error("a CSI volume needs refreshing (remount, republish)")
	}
}
