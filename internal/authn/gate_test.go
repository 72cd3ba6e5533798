package authn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	testingclock "k8s.io/utils/clock/testing"
)

// fakeAPIServer answers TokenReviews and SubjectAccessReviews through a
// fake clientset and counts them.
type fakeAPIServer struct {
	*fake.Clientset

	mu sync.Mutex
	// users are the tokens the API server knows; the token "expired" is
	// refused with an error message.
	users map[string]authenticationv1.UserInfo
	// allowed are the "user verb subresource" it allows; a user named
	// "confused" is both allowed and denied.
	allowed map[string]bool
	// failures are answered, one per review, before any answer.
	failures []error

	tokenReviews  int
	accessReviews []authorizationv1.SubjectAccessReviewSpec
}

func newFakeAPIServer() *fakeAPIServer {
	f := &fakeAPIServer{
		Clientset: fake.NewClientset(),
		users:     map[string]authenticationv1.UserInfo{},
		allowed:   map[string]bool{},
	}
	f.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.tokenReviews++
		if err := f.failure(); err != nil {
			return true, nil, err
		}
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		if u, ok := f.users[tr.Spec.Token]; ok {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: u}
		} else if tr.Spec.Token == "expired" {
			tr.Status.Error = "token has expired"
		}
		return true, tr, nil
	})
	f.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		f.accessReviews = append(f.accessReviews, sar.Spec)
		if err := f.failure(); err != nil {
			return true, nil, err
		}
		ra := sar.Spec.ResourceAttributes
		sar.Status.Allowed = f.allowed[sar.Spec.User+" "+ra.Verb+" "+ra.Subresource]
		if sar.Spec.User == "confused" {
			sar.Status.Allowed, sar.Status.Denied = true, true
		}
		if !sar.Status.Allowed {
			sar.Status.Reason = "no RBAC policy matched"
		}
		return true, sar, nil
	})
	return f
}

// failure pops the next failure; f.mu is held.
func (f *fakeAPIServer) failure() error {
	if len(f.failures) == 0 {
		return nil
	}
	err := f.failures[0]
	f.failures = f.failures[1:]
	return err
}

func (f *fakeAPIServer) counts() (tokenReviews, accessReviews int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tokenReviews, len(f.accessReviews)
}

var testEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// webhookConfig has both webhooks on with the kubelet's cache TTLs.
func webhookConfig() Config {
	return Config{
		NodeName:             "node-1",
		ClientCertificates:   true,
		TokenWebhook:         true,
		TokenWebhookCacheTTL: 2 * time.Minute,
		AuthorizationMode:    kubeletconfigv1beta1.KubeletAuthorizationModeWebhook,
		AuthorizedTTL:        5 * time.Minute,
		UnauthorizedTTL:      30 * time.Second,
	}
}

func newTestGate(t *testing.T, client kubernetes.Interface, cfg Config) (*Gate, *testingclock.FakeClock) {
	t.Helper()
	clk := testingclock.NewFakeClock(testEpoch)
	// Retries without the kubelet's half-second waits.
	g, err := newGate(client, cfg, slog.New(slog.DiscardHandler), clk, wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 3})
	if err != nil {
		t.Fatal(err)
	}
	return g, clk
}

// serve sends one request through the gate and reports the answer and the
// user the handler saw, if it ran.
func serve(g *Gate, r *http.Request) (*httptest.ResponseRecorder, *User) {
	var seen *User
	h := g.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := UserFrom(r.Context())
		seen = &u
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec, seen
}

func tokenRequest(method, path, token string) *http.Request {
	r := httptest.NewRequest(method, path, nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

func TestGateAuthentication(t *testing.T) {
	api := newFakeAPIServer()
	api.users["sa-token"] = authenticationv1.UserInfo{
		Username: "system:serviceaccount:kube-system:metrics-server", UID: "u-1",
		Groups: []string{"system:serviceaccounts", "system:authenticated"},
		Extra:  map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"metrics-server-1"}},
	}
	tokens, err := parseTokens(strings.NewReader("file-token,alice,1000,ops\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := webhookConfig()
	cfg.Tokens = tokens
	cfg.AuthorizationMode = kubeletconfigv1beta1.KubeletAuthorizationModeAlwaysAllow
	g, _ := newTestGate(t, api, cfg)
	apiserverClient := &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{Subject: pkix.Name{
		CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}}}}}}

	tests := []struct {
		name     string
		token    string
		tls      *tls.ConnectionState
		want     *User
		wantCode int
	}{
		{name: "nobody", wantCode: 401},
		{name: "the API server's client certificate", tls: apiserverClient, wantCode: 200,
			want: &User{Name: "kube-apiserver-kubelet-client", Groups: []string{"system:masters", "system:authenticated"}, Method: "x509"}},
		{name: "a token of the file", token: "file-token", wantCode: 200,
			want: &User{Name: "alice", UID: "1000", Groups: []string{"ops", "system:authenticated"}, Method: "token"}},
		{name: "a token the API server knows", token: "sa-token", wantCode: 200,
			want: &User{Name: "system:serviceaccount:kube-system:metrics-server", UID: "u-1",
				Groups: []string{"system:serviceaccounts", "system:authenticated"},
				Extra:  map[string][]string{"authentication.kubernetes.io/pod-name": {"metrics-server-1"}}, Method: "webhook"}},
		{name: "a token nobody knows", token: "bogus", wantCode: 401},
		{name: "an expired token", token: "expired", wantCode: 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tokenRequest("GET", "/pods", tt.token)
			r.TLS = tt.tls
			rec, seen := serve(g, r)
			if rec.Code != tt.wantCode {
				t.Fatalf("code %d %q, want %d", rec.Code, rec.Body.String(), tt.wantCode)
			}
			if !reflect.DeepEqual(seen, tt.want) {
				t.Errorf("user %+v, want %+v", seen, tt.want)
			}
			if rec.Code == 401 && rec.Header().Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
	// Only the two tokens not in the file were reviewed; the client
	// certificate and the file's token never reach the API server.
	if n, _ := api.counts(); n != 3 {
		t.Errorf("%d TokenReviews, want 3 (sa-token, bogus, expired)", n)
	}
}

func TestTokenReviewCache(t *testing.T) {
	api := newFakeAPIServer()
	api.users["good"] = authenticationv1.UserInfo{Username: "bob"}
	g, clk := newTestGate(t, api, Config{TokenWebhook: true, TokenWebhookCacheTTL: 2 * time.Minute,
		AuthorizationMode: kubeletconfigv1beta1.KubeletAuthorizationModeAlwaysAllow})
	step := func(what, token string, advance time.Duration, wantCode, wantReviews int) {
		t.Helper()
		clk.Step(advance)
		if rec, _ := serve(g, tokenRequest("GET", "/stats/summary", token)); rec.Code != wantCode {
			t.Errorf("%s: code %d, want %d", what, rec.Code, wantCode)
		}
		if n, _ := api.counts(); n != wantReviews {
			t.Errorf("%s: %d TokenReviews in all, want %d", what, n, wantReviews)
		}
	}
	step("first use", "good", 0, 200, 1)
	step("again", "good", time.Minute, 200, 1)
	step("just before the TTL", "good", time.Minute-time.Second, 200, 1)
	step("past the TTL", "good", 2*time.Second, 200, 2)
	step("a rejected token", "bogus", 0, 401, 3)
	step("a rejected token is kept too", "bogus", time.Minute, 401, 3)
	step("a rejection with an error is not kept", "expired", 0, 401, 4)
	step("so it is asked again", "expired", 0, 401, 5)

	// An API server that cannot answer: nothing is kept, and a transient
	// failure is retried.
	api.mu.Lock()
	api.failures = []error{errors.New("connection refused")}
	api.mu.Unlock()
	step("the API server is down", "other", 0, 401, 6)
	api.mu.Lock()
	api.users["other"] = authenticationv1.UserInfo{Username: "carol"}
	api.failures = []error{apierrors.NewInternalError(errors.New("etcd hiccup"))}
	api.mu.Unlock()
	step("after a transient failure, a retry", "other", 0, 200, 8)
	step("and the answer is kept", "other", 0, 200, 8)
}

func TestGateAuthorization(t *testing.T) {
	api := newFakeAPIServer()
	api.users["alice-token"] = authenticationv1.UserInfo{Username: "alice", Groups: []string{"dev"}}
	api.users["bob-token"] = authenticationv1.UserInfo{Username: "bob"}
	api.users["confused-token"] = authenticationv1.UserInfo{Username: "confused"}
	api.allowed["alice get proxy"] = true
	api.allowed["alice create proxy"] = true
	api.allowed["bob get stats"] = true
	api.allowed["bob get pods"] = true
	g, _ := newTestGate(t, api, webhookConfig())

	tests := []struct {
		name, method, path, token string
		wantCode                  int
		wantBody                  string
		// wantAsked are the subresources asked about, in order.
		wantAsked []string
	}{
		{name: "exec allowed by nodes/proxy create", method: "POST", path: "/exec/default/web/app?command=id",
			token: "alice-token", wantCode: 200, wantAsked: []string{"proxy"}},
		{name: "stats denied to a proxy-only user", method: "GET", path: "/stats/summary", token: "alice-token",
			wantCode: 403, wantBody: "Forbidden (user=alice, verb=get, resource=nodes, subresource(s)=[stats])",
			wantAsked: []string{"stats"}},
		{name: "pods falls back to proxy", method: "GET", path: "/pods", token: "alice-token",
			wantCode: 200, wantAsked: []string{"pods", "proxy"}},
		{name: "pods allowed by its own subresource", method: "GET", path: "/pods", token: "bob-token",
			wantCode: 200, wantAsked: []string{"pods"}},
		{name: "exec denied", method: "POST", path: "/exec/default/web/app?command=id", token: "bob-token",
			wantCode: 403, wantBody: "Forbidden (user=bob, verb=create, resource=nodes, subresource(s)=[proxy])",
			wantAsked: []string{"proxy"}},
		{name: "healthz denied on both", method: "GET", path: "/healthz", token: "bob-token",
			wantCode: 403, wantBody: "Forbidden (user=bob, verb=get, resource=nodes, subresource(s)=[healthz proxy])",
			wantAsked: []string{"healthz", "proxy"}},
		{name: "a method with no verb is never asked about", method: "OPTIONS", path: "/pods", token: "alice-token",
			wantCode: 403, wantBody: "Forbidden (user=alice, verb=, resource=nodes, subresource(s)=[pods proxy])"},
		{name: "a contradictory answer", method: "GET", path: "/metrics", token: "confused-token",
			wantCode: 500, wantBody: "Authorization error (user=confused, verb=get, resource=nodes, subresource=metrics)",
			wantAsked: []string{"metrics"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, before := api.counts()
			rec, seen := serve(g, tokenRequest(tt.method, tt.path, tt.token))
			if rec.Code != tt.wantCode || !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Errorf("got %d %q, want %d with %q", rec.Code, rec.Body.String(), tt.wantCode, tt.wantBody)
			}
			if (seen != nil) != (tt.wantCode == 200) {
				t.Errorf("the handler ran: %v", seen != nil)
			}
			api.mu.Lock()
			specs := api.accessReviews[before:]
			api.mu.Unlock()
			var asked []string
			for _, s := range specs {
				asked = append(asked, s.ResourceAttributes.Subresource)
				want := authorizationv1.ResourceAttributes{Verb: s.ResourceAttributes.Verb, Version: "v1",
					Resource: "nodes", Subresource: s.ResourceAttributes.Subresource, Name: "node-1"}
				if *s.ResourceAttributes != want {
					t.Errorf("asked about %+v, want %+v", *s.ResourceAttributes, want)
				}
				if !strings.HasPrefix(tt.token, s.User) || !slices.Contains(s.Groups, "system:authenticated") {
					t.Errorf("asked for user %q groups %v", s.User, s.Groups)
				}
			}
			if !reflect.DeepEqual(asked, tt.wantAsked) {
				t.Errorf("asked about %v, want %v", asked, tt.wantAsked)
			}
		})
	}
}

func TestAccessReviewCache(t *testing.T) {
	api := newFakeAPIServer()
	api.allowed["kube-apiserver-kubelet-client create proxy"] = true
	cfg := webhookConfig()
	cfg.TokenWebhook = false
	g, clk := newTestGate(t, api, cfg)
	client := &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{Subject: pkix.Name{
		CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}}}}}}
	step := func(what, method, path string, advance time.Duration, wantCode, wantReviews int) {
		t.Helper()
		clk.Step(advance)
		r := httptest.NewRequest(method, path, nil)
		r.TLS = client
		if rec, _ := serve(g, r); rec.Code != wantCode {
			t.Errorf("%s: code %d %q, want %d", what, rec.Code, rec.Body.String(), wantCode)
		}
		if _, n := api.counts(); n != wantReviews {
			t.Errorf("%s: %d SubjectAccessReviews in all, want %d", what, n, wantReviews)
		}
	}
	step("allowed", "POST", "/exec/default/web/app", 0, 200, 1)
	step("another pod, the same question", "POST", "/attach/default/db/app", 0, 200, 1)
	step("allowed is kept 5m", "POST", "/exec/default/web/app", 5*time.Minute-time.Second, 200, 1)
	step("then asked again", "POST", "/exec/default/web/app", 2*time.Second, 200, 2)
	step("denied", "GET", "/exec/default/web/app", 0, 403, 3)
	step("denied is kept 30s", "GET", "/exec/default/web/app", 29*time.Second, 403, 3)
	api.mu.Lock()
	api.allowed["kube-apiserver-kubelet-client get proxy"] = true
	api.mu.Unlock()
	step("then a new grant shows", "GET", "/exec/default/web/app", 2*time.Second, 200, 4)

	api.mu.Lock()
	api.failures = []error{errors.New("connection refused")}
	api.mu.Unlock()
	step("the API server is down", "GET", "/stats/summary", 0, 500, 5)
	step("a failure is not kept", "GET", "/stats/summary", 0, 403, 6)
	api.mu.Lock()
	api.failures = []error{apierrors.NewTooManyRequests("slow down", 0), apierrors.NewTooManyRequests("slow down", 0)}
	api.mu.Unlock()
	step("transient failures are retried", "GET", "/metrics", 0, 403, 9)
}

func TestGateRecordsCaller(t *testing.T) {
	api := newFakeAPIServer()
	api.users["bob-token"] = authenticationv1.UserInfo{Username: "bob"}
	g, _ := newTestGate(t, api, webhookConfig())
	for _, tt := range []struct {
		token string
		want  Caller
	}{
		{token: "", want: Caller{}},
		{token: "bob-token", want: Caller{User: User{Name: "bob", Groups: []string{"system:authenticated"}, Method: "webhook"}, Known: true}},
	} {
		var c Caller
		r := tokenRequest("GET", "/pods", tt.token)
		rec, _ := serve(g, r.WithContext(WithCaller(context.Background(), &c)))
		if !reflect.DeepEqual(c, tt.want) {
			t.Errorf("token %q (answered %d): caller %+v, want %+v", tt.token, rec.Code, c, tt.want)
		}
	}
}

func TestNewGateRefuses(t *testing.T) {
	api := newFakeAPIServer()
	allow := kubeletconfigv1beta1.KubeletAuthorizationModeAlwaysAllow
	tests := []struct {
		name    string
		client  kubernetes.Interface
		cfg     Config
		wantErr string
	}{
		{name: "token webhook without a client", cfg: Config{TokenWebhook: true, AuthorizationMode: allow},
			wantErr: "token webhook authentication asks the API server, and there is no client"},
		{name: "authorization webhook without a client", cfg: Config{ClientCertificates: true, AuthorizationMode: "Webhook"},
			wantErr: "authorization mode Webhook asks the API server, and there is no client"},
		{name: "no way to authenticate", client: api, cfg: Config{AuthorizationMode: allow},
			wantErr: "no way to authenticate callers"},
		{name: "no mode", client: api, cfg: Config{ClientCertificates: true},
			wantErr: `authorization mode "": want AlwaysAllow or Webhook`},
		{name: "unknown mode", client: api, cfg: Config{ClientCertificates: true, AuthorizationMode: "RBAC"},
			wantErr: `authorization mode "RBAC"`},
		{name: "negative TTL", client: api, cfg: Config{TokenWebhook: true, TokenWebhookCacheTTL: -time.Second, AuthorizationMode: allow},
			wantErr: "cache TTL -1s is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewGate(tt.client, tt.cfg, nil)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
	if _, err := NewGate(nil, Config{ClientCertificates: true, AuthorizationMode: allow}, nil); err != nil {
		t.Errorf("standalone AlwaysAllow: %v", err)
	}
}
