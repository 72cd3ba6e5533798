package kuberuntime

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestImageUser(t *testing.T) {
	tests := []struct {
		name     string
		img      *runtimeapi.Image
		wantUID  *int64
		wantName string
	}{
		{"uid 0", &runtimeapi.Image{Uid: &runtimeapi.Int64Value{Value: 0}}, ptr(int64(0)), ""},
		{"uid 1000", &runtimeapi.Image{Uid: &runtimeapi.Int64Value{Value: 1000}}, ptr(int64(1000)), ""},
		// The runtime fills in the uid when USER is "1000:1000" or "1000";
		// a uid beats a name it might also report.
		{"uid and name", &runtimeapi.Image{Uid: &runtimeapi.Int64Value{Value: 7}, Username: "seven"}, ptr(int64(7)), ""},
		{"user name", &runtimeapi.Image{Username: "nobody"}, nil, "nobody"},
		{"no user means root", &runtimeapi.Image{}, ptr(int64(0)), ""},
		{"no record means root", nil, ptr(int64(0)), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			uid, name := ImageUser(tt.img)
			if (uid == nil) != (tt.wantUID == nil) || (uid != nil && *uid != *tt.wantUID) || name != tt.wantName {
				t.Errorf("ImageUser = %v, %q; want %v, %q", fmtUID(uid), name, fmtUID(tt.wantUID), tt.wantName)
			}
		})
	}
}

func fmtUID(uid *int64) any {
	if uid == nil {
		return "nil"
	}
	return *uid
}

// The decision table of runAsNonRoot: the image's user as the runtime
// reports it, against the pod's and the container's security contexts.
func TestVerifyRunAsNonRoot(t *testing.T) {
	const (
		root     = `container has runAsNonRoot and image will run as root (pod: "p_ns(u)", container: app)`
		explicit = `container's runAsUser breaks non-root policy (pod: "p_ns(u)", container: app)`
		named    = `container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (pod: "p_ns(u)", container: app)`
	)
	uid := func(v int64) *runtimeapi.Image { return &runtimeapi.Image{Uid: &runtimeapi.Int64Value{Value: v}} }
	user := func(n string) *runtimeapi.Image { return &runtimeapi.Image{Username: n} }
	nonRoot := &v1.PodSecurityContext{RunAsNonRoot: ptr(true)}
	tests := []struct {
		name    string
		psc     *v1.PodSecurityContext
		csc     *v1.SecurityContext
		img     *runtimeapi.Image
		wantErr string
	}{
		{"uid 0", nonRoot, nil, uid(0), root},
		{"uid 1000", nonRoot, nil, uid(1000), ""},
		{"user root", nonRoot, nil, user("root"), strings.Replace(named, "%s", "root", 1)},
		{"user nobody", nonRoot, nil, user("nobody"), strings.Replace(named, "%s", "nobody", 1)},
		{"no user", nonRoot, nil, &runtimeapi.Image{}, root},
		{"uid beyond int32", nonRoot, nil, uid(1 << 40), "container has runAsNonRoot and image has an invalid user id (1099511627776). (Must be 1-(2147483647))"},
		{"runAsUser 1000 over a root image", nonRoot, &v1.SecurityContext{RunAsUser: ptr(int64(1000))}, &runtimeapi.Image{}, ""},
		{"runAsUser 1000 over a named user", nonRoot, &v1.SecurityContext{RunAsUser: ptr(int64(1000))}, user("nobody"), ""},
		{"runAsUser 0", nonRoot, &v1.SecurityContext{RunAsUser: ptr(int64(0))}, uid(1000), explicit},
		{"pod runAsUser 0", &v1.PodSecurityContext{RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(0))}, nil, uid(1000), explicit},
		{"container runAsUser 1000 over pod 0", &v1.PodSecurityContext{RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(0))},
			&v1.SecurityContext{RunAsUser: ptr(int64(1000))}, uid(0), ""},
		{"set on the container only", nil, &v1.SecurityContext{RunAsNonRoot: ptr(true)}, uid(0), root},
		{"unset", nil, nil, uid(0), ""},
		{"false", &v1.PodSecurityContext{RunAsNonRoot: ptr(false)}, nil, &runtimeapi.Image{}, ""},
		{"container false over pod true", nonRoot, &v1.SecurityContext{RunAsNonRoot: ptr(false)}, uid(0), ""},
		{"false with runAsUser 0", nil, &v1.SecurityContext{RunAsNonRoot: ptr(false), RunAsUser: ptr(int64(0))}, uid(0), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := securityPod(tt.psc, tt.csc)
			c := &pod.Spec.Containers[0]
			imageUID, imageUser := ImageUser(tt.img)
			err := VerifyRunAsNonRoot(pod, c, imageUID, imageUser)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.wantErr)):
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			// ContainerConfig checks the same, so no caller skips it.
			_, cerr := containerSecurityContext(pod, c, ContainerOptions{ImageUID: imageUID, ImageUser: imageUser})
			if (cerr == nil) != (err == nil) {
				t.Errorf("containerSecurityContext err = %v, VerifyRunAsNonRoot err = %v", cerr, err)
			}
		})
	}
}

// The image's user reaches the CRI as the kubelet sends it: an image that
// names no user runs with an explicit uid 0, a named one by name, and the
// pod's runAsUser replaces either.
func TestImageUserInSecurityContext(t *testing.T) {
	tests := []struct {
		name     string
		csc      *v1.SecurityContext
		img      *runtimeapi.Image
		wantUID  *int64
		wantName string
	}{
		{"no user", nil, &runtimeapi.Image{}, ptr(int64(0)), ""},
		{"uid", nil, &runtimeapi.Image{Uid: &runtimeapi.Int64Value{Value: 1000}}, ptr(int64(1000)), ""},
		{"name", nil, &runtimeapi.Image{Username: "nobody"}, nil, "nobody"},
		{"runAsUser wins", &v1.SecurityContext{RunAsUser: ptr(int64(5))}, &runtimeapi.Image{Username: "nobody"}, ptr(int64(5)), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := securityPod(nil, tt.csc)
			imageUID, imageUser := ImageUser(tt.img)
			sc, err := containerSecurityContext(pod, &pod.Spec.Containers[0], ContainerOptions{ImageUID: imageUID, ImageUser: imageUser})
			if err != nil {
				t.Fatal(err)
			}
			var got *int64
			if sc.RunAsUser != nil {
				got = &sc.RunAsUser.Value
			}
			if fmtUID(got) != fmtUID(tt.wantUID) || sc.RunAsUsername != tt.wantName {
				t.Errorf("runAsUser %v, runAsUsername %q; want %v, %q", fmtUID(got), sc.RunAsUsername, fmtUID(tt.wantUID), tt.wantName)
			}
		})
	}
}
