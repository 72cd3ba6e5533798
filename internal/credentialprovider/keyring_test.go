package credentialprovider

import (
	"encoding/base64"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestRegistryKey(t *testing.T) {
	for _, tt := range []struct{ loc, want string }{
		{"https://index.docker.io/v1/", "index.docker.io"},
		{"index.docker.io", "index.docker.io"},
		{"registry.example.com", "registry.example.com"},
		{"http://registry.example.com:5000", "registry.example.com:5000"},
		{"registry.example.com/team", "registry.example.com/team"},
		{"https://registry.example.com/v2/team/", "registry.example.com/team/"},
		{"*.example.com", "*.example.com"},
	} {
		if got, ok := registryKey(tt.loc); !ok || got != tt.want {
			t.Errorf("registryKey(%q) = %q, %v; want %q", tt.loc, got, ok, tt.want)
		}
	}
	if _, ok := registryKey("https://bad host/"); ok {
		t.Error("an unparsable location was accepted")
	}
}

func TestURLsMatch(t *testing.T) {
	for _, tt := range []struct {
		glob, target string
		want         bool
	}{
		{"registry.example.com", "registry.example.com/app", true},
		{"registry.example.com", "registry.example.com:5000/app", false}, // ports must agree
		{"registry.example.com:5000", "registry.example.com:5000/app", true},
		{"*.example.com", "registry.example.com/app", true},
		{"*.example.com", "a.b.example.com/app", false}, // one part per *
		{"*.example.com", "example.com/app", false},
		{"registry.*.com", "registry.example.com/app", true},
		{"registry.example.com/team", "registry.example.com/team/app", true},
		{"registry.example.com/team", "registry.example.com/teammate/app", true}, // a string prefix, as in the kubelet
		{"registry.example.com/team", "registry.example.com/other/app", false},
		{"index.docker.io", "docker.io/library/nginx", false},
		{"docker.io", "docker.io/library/nginx", true},
	} {
		if got := urlsMatch(tt.glob, tt.target); got != tt.want {
			t.Errorf("urlsMatch(%q, %q) = %v, want %v", tt.glob, tt.target, got, tt.want)
		}
	}
}

func TestIsDefaultRegistryMatch(t *testing.T) {
	for _, tt := range []struct {
		repo string
		want bool
	}{
		{"nginx", true},
		{"library/nginx", true},
		{"docker.io/library/nginx", true},
		{"index.docker.io/library/nginx", true},
		{"registry.example.com/app", false},
		{"localhost:5000/app", false},
		{"", false},
	} {
		if got := isDefaultRegistryMatch(tt.repo); got != tt.want {
			t.Errorf("isDefaultRegistryMatch(%q) = %v, want %v", tt.repo, got, tt.want)
		}
	}
}

func auth(user string) *runtimeapi.AuthConfig {
	return &runtimeapi.AuthConfig{Username: user, Password: user + "-pw"}
}

func entry(user string) DockerConfigEntry {
	return DockerConfigEntry{Username: user, Password: user + "-pw"}
}

func TestCredentials(t *testing.T) {
	k := &Keyring{}
	k.Add(DockerConfig{
		"https://index.docker.io/v1/":  entry("hub"),
		"registry.example.com":         entry("reg"),
		"registry.example.com/private": entry("private"),
		"*.corp.example":               entry("corp"),
		"localhost:5000":               entry("local"),
	})
	// A second secret adds to a key already there, after it.
	k.Add(DockerConfig{"registry.example.com": entry("reg2")})
	for _, tt := range []struct {
		image string
		want  []*runtimeapi.AuthConfig
	}{
		{"nginx", []*runtimeapi.AuthConfig{auth("hub")}},
		{"nginx:1.27", []*runtimeapi.AuthConfig{auth("hub")}},
		{"docker.io/library/nginx@sha256:" + strings.Repeat("a", 64), []*runtimeapi.AuthConfig{auth("hub")}},
		{"someone/tool", []*runtimeapi.AuthConfig{auth("hub")}},
		{"registry.example.com/app:v1", []*runtimeapi.AuthConfig{auth("reg"), auth("reg2")}},
		// The more specific key first, then the registry's.
		{"registry.example.com/private/app", []*runtimeapi.AuthConfig{auth("private"), auth("reg"), auth("reg2")}},
		{"build.corp.example/app", []*runtimeapi.AuthConfig{auth("corp")}},
		{"localhost:5000/app", []*runtimeapi.AuthConfig{auth("local")}},
		{"other.example.org/app", nil},
	} {
		got, err := Credentials(tt.image, k)
		if err != nil {
			t.Errorf("%s: %v", tt.image, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Credentials(%q) = %v, want %v", tt.image, got, tt.want)
		}
	}
	if _, err := Credentials("UPPER/Case", k); err == nil {
		t.Error("an invalid image name was accepted")
	}
	if got, err := Credentials("nginx", nil); err != nil || got != nil {
		t.Errorf("no keyring: %v, %v", got, err)
	}
}

func TestKeyringFromSecrets(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	secret := func(name string, typ v1.SecretType, key, data string) *v1.Secret {
		return &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Type: typ, Data: map[string][]byte{key: []byte(data)}}
	}
	secrets := []*v1.Secret{
		secret("json", v1.SecretTypeDockerConfigJson, v1.DockerConfigJsonKey,
			`{"auths":{"registry.example.com":{"auth":"`+b64("alice:pa:ss")+`"}}}`),
		secret("cfg", v1.SecretTypeDockercfg, v1.DockerConfigKey,
			`{"https://index.docker.io/v1/":{"username":"bob","password":"pw","email":"b@example.com"}}`),
		// Unpadded auth, as some tools write it.
		secret("raw", v1.SecretTypeDockerConfigJson, v1.DockerConfigJsonKey,
			`{"auths":{"raw.example.com":{"auth":"`+strings.TrimRight(b64("carol:x"), "=")+`"}}}`),
		// Not pull secrets: ignored.
		secret("opaque", v1.SecretTypeOpaque, v1.DockerConfigJsonKey, `{"auths":{"registry.example.com":{"username":"eve"}}}`),
		secret("wrong-key", v1.SecretTypeDockerConfigJson, "config.json", `not json`),
	}
	k, err := KeyringFromSecrets(secrets)
	if err != nil {
		t.Fatal(err)
	}
	for image, want := range map[string][]*runtimeapi.AuthConfig{
		"registry.example.com/app": {{Username: "alice", Password: "pa:ss"}},
		"busybox":                  {{Username: "bob", Password: "pw"}},
		"raw.example.com/app":      {{Username: "carol", Password: "x"}},
	} {
		if got, _ := Credentials(image, k); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", image, got, want)
		}
	}

	for _, bad := range []*v1.Secret{
		secret("broken", v1.SecretTypeDockerConfigJson, v1.DockerConfigJsonKey, `{"auths":`),
		secret("bad-auth", v1.SecretTypeDockercfg, v1.DockerConfigKey, `{"r.example.com":{"auth":"`+b64("no-colon")+`"}}`),
	} {
		if _, err := KeyringFromSecrets([]*v1.Secret{bad}); err == nil || !strings.Contains(err.Error(), `secret "`+bad.Name+`"`) {
			t.Errorf("%s: err = %v, want one naming the secret", bad.Name, err)
		}
	}
}
