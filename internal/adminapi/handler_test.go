package adminapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-dev/berth/internal/podsource"
)

const testNode = "node-a"

// staticPods is a fixed manifest directory; err stands for one not read yet.
type staticPods struct {
	names map[string]bool
	err   error
}

func (s staticPods) IsStatic(_ context.Context, namespace, name string) (bool, error) {
	return s.names[namespace+"/"+name], s.err
}

// testServer is the admin API on a real socket in its own directory, backed
// by a real store there.
type testServer struct {
	dir    string
	socket string
	store  *podsource.Store
	client *Client
}

func startServer(t *testing.T, store Store, static StaticPods) *testServer {
	t.Helper()
	// Not t.TempDir: its path, named after the test, can exceed the 108
	// bytes a socket path may have.
	dir, err := os.MkdirTemp("", "adminapi-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ts := &testServer{dir: dir, socket: SocketPath(dir)}
	if store == nil {
		ts.store, err = podsource.OpenStore(filepath.Join(dir, podsource.StoreDirName), testNode,
			clocktesting.NewFakePassiveClock(time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)), nil)
		if err != nil {
			t.Fatal(err)
		}
		store = ts.store
	}
	ctx, cancel := context.WithCancel(context.Background())
	ln, err := Listen(ctx, ts.socket)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		served <- Serve(ctx, ln, NewHandler(store, static, testNode, nil), slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if _, err := os.Lstat(ts.socket); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("socket left behind at shutdown: %v", err)
		}
	})
	ts.client = NewClient(ts.socket)
	return ts
}

func (ts *testServer) apply(t *testing.T, body string) *ApplyResponse {
	t.Helper()
	resp, err := ts.client.Apply(context.Background(), []byte(body))
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return resp
}

// rawCode sends a request and returns the HTTP status code.
func (ts *testServer) rawCode(t *testing.T, method, path, body string) int {
	t.Helper()
	c := http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", ts.socket)
		}}}
	req, err := http.NewRequest(method, "http://berth"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func podYAML(name, image string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  containers:\n  - name: c\n    image: %s\n", name, image)
}

func TestApplyCreatesConfiguresUnchanged(t *testing.T) {
	ts := startServer(t, nil, staticPods{})
	first := ts.apply(t, podYAML("web", "busybox:1"))
	if len(first.Pods) != 1 {
		t.Fatalf("results %+v", first.Pods)
	}
	r := first.Pods[0]
	if r.Namespace != "default" || r.Name != "web" || r.Result != podsource.PodCreated || r.UID == "" || r.Error != nil {
		t.Errorf("first apply: %+v", r)
	}
	again := ts.apply(t, podYAML("web", "busybox:1")).Pods[0]
	if again.Result != podsource.PodUnchanged || again.UID != r.UID {
		t.Errorf("same pod again: %+v, want unchanged with UID %s", again, r.UID)
	}
	changed := ts.apply(t, podYAML("web", "busybox:2")).Pods[0]
	if changed.Result != podsource.PodConfigured || changed.UID == r.UID {
		t.Errorf("changed pod: %+v, want configured with a new UID", changed)
	}
	snap := ts.store.Snapshot()
	if len(snap.Pods) != 1 || snap.Pods[0].UID != changed.UID || snap.Pods[0].Annotations[podsource.ConfigSourceAnnotationKey] != "api" {
		t.Errorf("stored %+v", snap.Pods)
	}
}

func TestApplyEachPodOnItsOwn(t *testing.T) {
	ts := startServer(t, nil, staticPods{names: map[string]bool{"default/static-node-a": true}})
	body := podYAML("good", "busybox:1") +
		"---\n" + podYAML("bad", "") +
		"---\n" + podYAML("static-node-a", "busybox:1") +
		"---\n" + podYAML("typo", "busybox:1") + "    imag: x\n"
	resp := ts.apply(t, body)
	want := []struct {
		name   string
		line   int
		code   int32
		reason metav1.StatusReason
		text   string
	}{
		{"good", 1, 0, "", ""},
		{"bad", 10, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, `Pod "bad" is invalid: spec.containers[0].image: Required value`},
		{"static-node-a", 19, http.StatusConflict, metav1.StatusReasonConflict, "static pod default/static-node-a of the manifest directory has this name"},
		{"typo", 28, http.StatusBadRequest, metav1.StatusReasonBadRequest, `unknown field "spec.containers[0].imag"`},
	}
	if len(resp.Pods) != len(want) {
		t.Fatalf("results %+v", resp.Pods)
	}
	for i, w := range want {
		r := resp.Pods[i]
		if r.Name != w.name || r.Line != w.line {
			t.Errorf("result %d: %s at line %d, want %s at line %d", i, r.Name, r.Line, w.name, w.line)
		}
		if w.code == 0 {
			if r.Error != nil || r.Result != podsource.PodCreated {
				t.Errorf("result %d: %+v, want created", i, r)
			}
			continue
		}
		if r.Error == nil || r.Error.Code != w.code || r.Error.Reason != w.reason || r.Error.Kind != "Status" ||
			!strings.Contains(r.Error.Message, w.text) || r.Result != "" || r.UID != "" {
			t.Errorf("result %d: %+v, error %+v; want %d %s %q", i, r, r.Error, w.code, w.reason, w.text)
		}
	}
	// The invalid pod's Status names the field, as the API server's does.
	if c := resp.Pods[1].Error.Details.Causes; len(c) != 1 || c[0].Field != "spec.containers[0].image" {
		t.Errorf("causes %+v", c)
	}
	if got := ts.store.Snapshot().Pods; len(got) != 1 || got[0].Name != "good" {
		t.Errorf("stored %d pods, want only good", len(got))
	}
	// The HTTP code is the first refused pod's.
	if code := ts.rawCode(t, http.MethodPost, "/pods", body); code != http.StatusUnprocessableEntity {
		t.Errorf("HTTP code %d, want 422", code)
	}
	if code := ts.rawCode(t, http.MethodPost, "/pods", podYAML("good", "busybox:1")); code != http.StatusOK {
		t.Errorf("HTTP code %d, want 200", code)
	}
}

func TestApplyRefusedAsAWhole(t *testing.T) {
	ts := startServer(t, nil, staticPods{})
	for _, tc := range []struct {
		name string
		body string
		code int32
	}{
		{"empty", "", http.StatusBadRequest},
		{"only comments", "# nothing\n---\n", http.StatusBadRequest},
		{"too large", strings.Repeat("#", maxBodyBytes+1), http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := ts.client.Apply(context.Background(), []byte(tc.body))
			var se *apierrors.StatusError
			if !errors.As(err, &se) || se.ErrStatus.Code != tc.code {
				t.Errorf("Apply = %+v, %v; want a Status with code %d", resp, err, tc.code)
			}
		})
	}
}

func TestApplyBeforeManifestsAreRead(t *testing.T) {
	ts := startServer(t, nil, staticPods{err: errors.New("the manifest directory has not been read yet")})
	r := ts.apply(t, podYAML("web", "busybox:1")).Pods[0]
	if r.Error == nil || r.Error.Code != http.StatusServiceUnavailable {
		t.Errorf("result %+v, want 503", r)
	}
}

// failingStore fails every write, as a full disk would.
type failingStore struct{}

func (failingStore) Apply(*v1.Pod) (*v1.Pod, podsource.Applied, error) {
	return nil, "", errors.New("no space left on device")
}
func (failingStore) Delete(string, string) (*v1.Pod, error) {
	return nil, errors.New("read-only file system")
}

func TestStoreFailures(t *testing.T) {
	ts := startServer(t, failingStore{}, staticPods{})
	r := ts.apply(t, podYAML("web", "busybox:1")).Pods[0]
	if r.Error == nil || r.Error.Code != http.StatusInternalServerError || !strings.Contains(r.Error.Message, "no space left") {
		t.Errorf("apply: %+v", r.Error)
	}
	_, err := ts.client.Delete(context.Background(), "default", "web")
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("delete: %v", err)
	}
}

func TestDelete(t *testing.T) {
	ts := startServer(t, nil, staticPods{names: map[string]bool{"default/static-node-a": true}})
	uid := ts.apply(t, podYAML("web", "busybox:1")).Pods[0].UID
	ctx := context.Background()

	st, err := ts.client.Delete(ctx, "default", "web")
	if err != nil || st.Status != metav1.StatusSuccess || st.Details == nil || st.Details.UID != uid || st.Message != `pod "web" deleted` {
		t.Fatalf("Delete = %+v, %v", st, err)
	}
	if n := len(ts.store.Snapshot().Pods); n != 0 {
		t.Errorf("%d pods left in the store", n)
	}
	_, err = ts.client.Delete(ctx, "default", "web")
	if !apierrors.IsNotFound(err) || err.Error() != `pods "web" not found in namespace "default"` {
		t.Errorf("deleting it again: %v", err)
	}
	_, err = ts.client.Delete(ctx, "default", "static-node-a")
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "delete its manifest instead") {
		t.Errorf("deleting a static pod: %v", err)
	}
	if code := ts.rawCode(t, http.MethodDelete, "/pods/default/nothing", ""); code != http.StatusNotFound {
		t.Errorf("HTTP code %d, want 404", code)
	}
}

func TestDeleteShadowedPod(t *testing.T) {
	// A pod applied before a manifest took its name can still be deleted:
	// the store's copy goes, the static pod stays.
	ts := startServer(t, nil, staticPods{names: map[string]bool{"default/web": true}})
	docs := podsource.DecodeAPIPods([]byte(podYAML("web", "busybox:1")), testNode)
	if _, _, err := ts.store.Apply(docs[0].Pod); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.client.Delete(context.Background(), "default", "web"); err != nil {
		t.Errorf("deleting the shadowed pod: %v", err)
	}
	if n := len(ts.store.Snapshot().Pods); n != 0 {
		t.Errorf("%d pods left in the store", n)
	}
}

func TestClientCannotConnect(t *testing.T) {
	c := NewClient(filepath.Join(t.TempDir(), "none.sock"))
	if _, err := c.Apply(context.Background(), []byte(podYAML("web", "busybox:1"))); err == nil || !strings.Contains(err.Error(), "none.sock") {
		t.Errorf("Apply without a server: %v", err)
	}
}

// Profiles are served only when asked for, as Go's pprof formats them.
func TestProfiling(t *testing.T) {
	for _, tc := range []struct {
		opts []Option
		want int
	}{{nil, http.StatusNotFound}, {[]Option{WithProfiling()}, http.StatusOK}} {
		srv := httptest.NewServer(NewHandler(nil, nil, testNode, nil, tc.opts...))
		resp, err := srv.Client().Get(srv.URL + "/debug/pprof/heap?debug=1")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("with %d options: GET /debug/pprof/heap = %d, want %d", len(tc.opts), resp.StatusCode, tc.want)
		}
		if tc.want == http.StatusOK && !strings.Contains(string(body), "heap profile") {
			t.Errorf("GET /debug/pprof/heap served %.80q, not a heap profile", body)
		}
	}
}
