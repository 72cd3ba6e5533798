package podobjects

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newTestClient(objects ...runtime.Object) (*Client, *fake.Clientset, *testingclock.FakeClock) {
	cs := fake.NewClientset(objects...)
	clk := testingclock.NewFakeClock(t0)
	c := New(cs, Options{TTL: 30 * time.Second, Clock: clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return c, cs, clk
}

// gets counts the GETs of one resource the client made.
func gets(cs *fake.Clientset, resource string) int {
	n := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == resource {
			n++
		}
	}
	return n
}

func configMap(ns, name, value string) *v1.ConfigMap {
	return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"k": value}}
}

func TestConfigMapCachedForTTL(t *testing.T) {
	c, cs, clk := newTestClient(configMap("prod", "settings", "v1"))
	ctx := context.Background()
	get := func() string {
		t.Helper()
		cm, err := c.GetConfigMap(ctx, "prod", "settings")
		if err != nil {
			t.Fatal(err)
		}
		return cm.Data["k"]
	}
	if got := get(); got != "v1" {
		t.Fatalf("got %q", got)
	}
	if err := cs.Tracker().Update(v1.SchemeGroupVersion.WithResource("configmaps"), configMap("prod", "settings", "v2"), "prod"); err != nil {
		t.Fatal(err)
	}
	clk.Step(29 * time.Second)
	if got := get(); got != "v1" || gets(cs, "configmaps") != 1 {
		t.Fatalf("within the TTL: %q after %d GETs, want the cached v1 after 1", got, gets(cs, "configmaps"))
	}
	clk.Step(time.Second)
	if got := get(); got != "v2" || gets(cs, "configmaps") != 2 {
		t.Fatalf("past the TTL: %q after %d GETs, want v2 after 2", got, gets(cs, "configmaps"))
	}
	// Another namespace's object of the same name is another object.
	if _, err := c.GetConfigMap(ctx, "dev", "settings"); !apierrors.IsNotFound(err) {
		t.Fatalf("dev/settings: %v", err)
	}
}

func TestNotFoundIsWordedAsTheKubeletsAndCached(t *testing.T) {
	c, cs, clk := newTestClient()
	ctx := context.Background()
	_, err := c.GetConfigMap(ctx, "prod", "absent")
	if !apierrors.IsNotFound(err) || err.Error() != `configmap "absent" not found` {
		t.Fatalf("err = %v", err)
	}
	_, err = c.GetSecret(ctx, "prod", "absent")
	if !apierrors.IsNotFound(err) || err.Error() != `secret "absent" not found` {
		t.Fatalf("err = %v", err)
	}
	if _, err := c.GetConfigMap(ctx, "prod", "absent"); !apierrors.IsNotFound(err) || gets(cs, "configmaps") != 1 {
		t.Fatalf("a NotFound within the TTL made %d GETs: %v", gets(cs, "configmaps"), err)
	}
	// Created since: seen once the TTL is over.
	if err := cs.Tracker().Add(configMap("prod", "absent", "now")); err != nil {
		t.Fatal(err)
	}
	clk.Step(30 * time.Second)
	if cm, err := c.GetConfigMap(ctx, "prod", "absent"); err != nil || cm.Data["k"] != "now" {
		t.Fatalf("after creation: %v, %v", cm, err)
	}
}

func TestOtherErrorsAreNotCached(t *testing.T) {
	c, cs, _ := newTestClient(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "creds"}})
	failures := 1
	cs.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failures > 0 {
			failures--
			return true, nil, apierrors.NewForbidden(v1.Resource("secrets"), "creds", errors.New("no relationship found"))
		}
		return false, nil, nil
	})
	ctx := context.Background()
	if _, err := c.GetSecret(ctx, "prod", "creds"); !apierrors.IsForbidden(err) {
		t.Fatalf("first get: %v", err)
	}
	if _, err := c.GetSecret(ctx, "prod", "creds"); err != nil {
		t.Fatalf("the next get did not try again: %v", err)
	}
}

func TestStaleCopyServedWhileTheAPIServerIsAway(t *testing.T) {
	c, cs, clk := newTestClient(configMap("prod", "settings", "v1"))
	ctx := context.Background()
	if _, err := c.GetConfigMap(ctx, "prod", "settings"); err != nil {
		t.Fatal(err)
	}
	down := true
	cs.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if down {
			return true, nil, apierrors.NewServiceUnavailable("etcd is down")
		}
		return false, nil, nil
	})
	if err := cs.Tracker().Update(v1.SchemeGroupVersion.WithResource("configmaps"), configMap("prod", "settings", "v2"), "prod"); err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // each call past the TTL tries the API again
		clk.Step(time.Minute)
		cm, err := c.GetConfigMap(ctx, "prod", "settings")
		if err != nil || cm.Data["k"] != "v1" {
			t.Fatalf("during the outage: %v, %v; want the stale v1", cm, err)
		}
		if n := gets(cs, "configmaps"); n != 2+i {
			t.Fatalf("%d GETs, want %d", n, 2+i)
		}
	}
	down = false
	if cm, err := c.GetConfigMap(ctx, "prod", "settings"); err != nil || cm.Data["k"] != "v2" {
		t.Fatalf("after the outage: %v, %v", cm, err)
	}
	// Never read before: the error is the caller's.
	down = true
	if _, err := c.GetConfigMap(ctx, "prod", "other"); !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("err = %v", err)
	}
}

func TestCacheForgetsUnusedObjects(t *testing.T) {
	c, _, clk := newTestClient(configMap("prod", "a", "1"), configMap("prod", "b", "1"))
	ctx := context.Background()
	for _, name := range []string{"a", "b"} {
		if _, err := c.GetConfigMap(ctx, "prod", name); err != nil {
			t.Fatal(err)
		}
	}
	// b stays in use, a does not.
	for range 5 {
		clk.Step(time.Minute)
		if _, err := c.GetConfigMap(ctx, "prod", "b"); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := c.configMaps.items["prod/a"]; ok || len(c.configMaps.items) != 1 {
		t.Errorf("cache holds %d objects, want only b", len(c.configMaps.items))
	}
}

// TestConcurrentGets runs callers at once (for the race detector) and
// checks they all see the object.
func TestConcurrentGets(t *testing.T) {
	c, _, _ := newTestClient(configMap("prod", "settings", "v1"))
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Go(func() {
			cm, err := c.GetConfigMap(context.Background(), "prod", "settings")
			if err == nil && cm.Data["k"] != "v1" {
				err = errors.New("wrong content " + cm.Data["k"])
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func TestServiceAccountToken(t *testing.T) {
	c, cs, clk := newTestClient()
	issued := 0
	cs.PrependReactor("create", "serviceaccounts", func(action k8stesting.Action) (bool, runtime.Object, error) {
		create := action.(k8stesting.CreateAction)
		if create.GetSubresource() != "token" {
			return false, nil, nil
		}
		issued++
		tr := create.GetObject().(*authenticationv1.TokenRequest).DeepCopy()
		tr.Status = authenticationv1.TokenRequestStatus{
			Token:               "jwt-" + string(rune('0'+issued)),
			ExpirationTimestamp: metav1.NewTime(clk.Now().Add(time.Duration(*tr.Spec.ExpirationSeconds) * time.Second)),
		}
		return true, tr, nil
	})
	seconds := int64(3607)
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &seconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: "web", UID: "u1"},
	}}
	ctx := context.Background()
	for range 2 {
		tr, err := c.GetServiceAccountToken(ctx, "prod", "default", req)
		if err != nil || tr.Status.Token != "jwt-1" {
			t.Fatalf("token %v, %v", tr, err)
		}
	}
	clk.Step(time.Hour) // past 80% of its life (and past its end)
	if tr, err := c.GetServiceAccountToken(ctx, "prod", "default", req); err != nil || tr.Status.Token != "jwt-2" {
		t.Fatalf("renewed token %v, %v", tr, err)
	}
}
