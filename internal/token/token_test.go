package token

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// issued is a token with lifetime seconds that expires at exp.
func issued(token string, seconds int64, exp time.Time) *authenticationv1.TokenRequest {
	return &authenticationv1.TokenRequest{
		Spec:   authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds},
		Status: authenticationv1.TokenRequestStatus{Token: token, ExpirationTimestamp: metav1.NewTime(exp)},
	}
}

func TestRequiresRefresh(t *testing.T) {
	hour := issued("t", 3600, t0.Add(time.Hour))       // issued at t0
	day2 := issued("t", 2*86400, t0.Add(48*time.Hour)) // issued at t0, 2 days
	noLifetime := issued("t", 0, t0.Add(time.Hour))
	noLifetime.Spec.ExpirationSeconds = nil
	for _, tt := range []struct {
		name   string
		now    time.Time
		tr     *authenticationv1.TokenRequest
		jitter time.Duration
		want   bool
	}{
		{"fresh", t0, hour, 0, false},
		{"just before 80%", t0.Add(48 * time.Minute), hour, 0, false},
		{"just past 80%", t0.Add(48*time.Minute + time.Second), hour, 0, true},
		{"jitter brings it forward", t0.Add(47*time.Minute + 55*time.Second), hour, 10 * time.Second, true},
		{"expired", t0.Add(2 * time.Hour), hour, 0, true},
		{"long-lived: at 24h", t0.Add(24 * time.Hour), day2, 0, false},
		{"long-lived: past 24h", t0.Add(24*time.Hour + time.Second), day2, 0, true},
		{"long-lived: jitter before 24h", t0.Add(24*time.Hour - 5*time.Second), day2, 10 * time.Second, true},
		{"unknown lifetime", t0.Add(2 * time.Hour), noLifetime, 0, false},
	} {
		if got := RequiresRefresh(tt.now, tt.tr, tt.jitter); got != tt.want {
			t.Errorf("%s: RequiresRefresh = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// fakeAPI issues numbered tokens of the requested lifetime, or fails.
type fakeAPI struct {
	clock *testingclock.FakeClock
	calls int
	fail  error
	last  *authenticationv1.TokenRequest
}

func (f *fakeAPI) request(_ context.Context, namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	f.calls++
	f.last = tr
	if f.fail != nil {
		return nil, f.fail
	}
	seconds := int64(3600)
	if tr.Spec.ExpirationSeconds != nil {
		seconds = *tr.Spec.ExpirationSeconds
	}
	out := issued(namespace+"/"+name+"#"+string(rune('0'+f.calls)), seconds, f.clock.Now().Add(time.Duration(seconds)*time.Second))
	out.Spec.Audiences = tr.Spec.Audiences
	out.Spec.BoundObjectRef = tr.Spec.BoundObjectRef
	return out, nil
}

func newTestManager() (*Manager, *fakeAPI, *testingclock.FakeClock) {
	clk := testingclock.NewFakeClock(t0)
	api := &fakeAPI{clock: clk}
	m := NewManager(api.request, clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	m.jitter = func() time.Duration { return 0 }
	return m, api, clk
}

func podRequest(pod string, uid types.UID, seconds int64, audiences ...string) *authenticationv1.TokenRequest {
	return &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:         audiences,
		ExpirationSeconds: &seconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod, UID: uid},
	}}
}

func TestManagerCachesAndRenews(t *testing.T) {
	m, api, clk := newTestManager()
	ctx := context.Background()
	get := func() string {
		t.Helper()
		tr, err := m.GetServiceAccountToken(ctx, "prod", "default", podRequest("web", "u1", 3607))
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	first := get()
	if got := get(); got != first || api.calls != 1 {
		t.Fatalf("second get = %q after %d calls, want the cached %q", got, api.calls, first)
	}
	// 80% of 3607s is 2885.6s; the kubelet's 20% is 721 whole seconds.
	clk.SetTime(t0.Add(2886 * time.Second))
	if got := get(); got != first {
		t.Fatalf("renewed too early: %q", got)
	}
	clk.SetTime(t0.Add(2887 * time.Second))
	second := get()
	if second == first || api.calls != 2 {
		t.Fatalf("not renewed past 80%%: %q after %d calls", second, api.calls)
	}

	// A failed renewal keeps serving the valid token...
	api.fail = errors.New("apiserver down")
	clk.SetTime(clk.Now().Add(3000 * time.Second))
	if got := get(); got != second {
		t.Fatalf("after a failed renewal got %q, want the old %q", got, second)
	}
	// ...until it expires: then the failure is the caller's.
	clk.SetTime(clk.Now().Add(time.Hour))
	_, err := m.GetServiceAccountToken(ctx, "prod", "default", podRequest("web", "u1", 3607))
	if err == nil || !strings.Contains(err.Error(), "apiserver down") {
		t.Fatalf("err = %v", err)
	}
	// Once the API server answers again, a new token comes.
	api.fail = nil
	if got := get(); got == second {
		t.Fatalf("still the expired token %q", got)
	}
}

func TestManagerKeys(t *testing.T) {
	m, api, _ := newTestManager()
	ctx := context.Background()
	reqs := []*authenticationv1.TokenRequest{
		podRequest("web", "u1", 3607),
		podRequest("web", "u2", 3607),          // another pod
		podRequest("web", "u1", 600),           // another lifetime
		podRequest("web", "u1", 3607, "vault"), // another audience
	}
	seen := map[string]bool{}
	for _, r := range reqs {
		tr, err := m.GetServiceAccountToken(ctx, "prod", "default", r)
		if err != nil {
			t.Fatal(err)
		}
		seen[tr.Status.Token] = true
	}
	if _, err := m.GetServiceAccountToken(ctx, "prod", "builder", reqs[0]); err != nil { // another account
		t.Fatal(err)
	}
	if len(seen) != 4 || api.calls != 5 {
		t.Errorf("%d distinct tokens in %d calls, want 4 and 5", len(seen), api.calls)
	}
	if api.last.Spec.BoundObjectRef.Name != "web" {
		t.Errorf("request = %+v", api.last.Spec)
	}

	m.DeleteServiceAccountToken("u1")
	if _, err := m.GetServiceAccountToken(ctx, "prod", "default", reqs[1]); err != nil || api.calls != 5 {
		t.Errorf("the other pod's token was dropped: %d calls, %v", api.calls, err)
	}
	if _, err := m.GetServiceAccountToken(ctx, "prod", "default", reqs[0]); err != nil || api.calls != 6 {
		t.Errorf("the deleted pod's token was kept: %d calls, %v", api.calls, err)
	}
}

func TestManagerFirstFetchFails(t *testing.T) {
	m, api, _ := newTestManager()
	api.fail = errors.New(`serviceaccounts "ghost" not found`)
	_, err := m.GetServiceAccountToken(context.Background(), "prod", "ghost", podRequest("web", "u1", 3607))
	if err == nil || err.Error() != `failed to fetch token: serviceaccounts "ghost" not found` {
		t.Fatalf("err = %v", err)
	}
}

func TestManagerDropsExpiredTokens(t *testing.T) {
	m, _, clk := newTestManager()
	ctx := context.Background()
	if _, err := m.GetServiceAccountToken(ctx, "prod", "default", podRequest("old", "u1", 600)); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(t0.Add(time.Hour))
	if _, err := m.GetServiceAccountToken(ctx, "prod", "default", podRequest("new", "u2", 3607)); err != nil {
		t.Fatal(err)
	}
	if len(m.cache) != 1 {
		t.Errorf("cache holds %d tokens, want only the live one", len(m.cache))
	}
}

func TestClientRequest(t *testing.T) {
	client := fake.NewClientset()
	var got *authenticationv1.TokenRequest
	client.PrependReactor("create", "serviceaccounts", func(action k8stesting.Action) (bool, runtime.Object, error) {
		create := action.(k8stesting.CreateAction)
		if create.GetSubresource() != "token" || create.GetNamespace() != "prod" {
			return false, nil, nil
		}
		got = create.GetObject().(*authenticationv1.TokenRequest)
		out := got.DeepCopy()
		out.Status = authenticationv1.TokenRequestStatus{Token: "jwt", ExpirationTimestamp: metav1.NewTime(t0.Add(time.Hour))}
		return true, out, nil
	})
	tr, err := ClientRequest(client, time.Minute)(context.Background(), "prod", "default", podRequest("web", "u1", 3607))
	if err != nil {
		t.Fatal(err)
	}
	if tr.Status.Token != "jwt" || got == nil || *got.Spec.ExpirationSeconds != 3607 || got.Spec.BoundObjectRef.UID != "u1" {
		t.Errorf("token %q, request %+v", tr.Status.Token, got)
	}
}
