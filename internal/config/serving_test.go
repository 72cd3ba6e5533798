package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

const (
	alwaysAllow = kubeletconfigv1beta1.KubeletAuthorizationModeAlwaysAllow
	webhook     = kubeletconfigv1beta1.KubeletAuthorizationModeWebhook
)

// standalone is s with the delegation defaults of a node without an API
// server.
func standalone(s Serving) Serving {
	s.defaultDelegation("")
	return s
}

func TestServing(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		args    []string
		want    Serving
		wantErr string
	}{
		{name: "off by default", want: standalone(Serving{})},
		{
			name: "from the file",
			file: header + `port: 10250
tlsCertFile: /pki/berth.crt
tlsPrivateKeyFile: /pki/berth.key
authentication:
  x509:
    clientCAFile: /pki/ca.crt
  anonymous:
    enabled: false
`,
			want: standalone(Serving{Port: 10250, TLSCertFile: "/pki/berth.crt", TLSPrivateKeyFile: "/pki/berth.key", ClientCAFile: "/pki/ca.crt"}),
		},
		{
			name: "flags override the file",
			file: header + "port: 10250\nauthentication:\n  x509:\n    clientCAFile: /pki/ca.crt\n",
			args: []string{"--port=11250", "--token-auth-file=/etc/berth/tokens.csv", "--client-ca-file=/other/ca.crt"},
			want: standalone(Serving{Port: 11250, ClientCAFile: "/other/ca.crt", TokenAuthFile: "/etc/berth/tokens.csv"}),
		},
		{
			name: "the API server's part from the file, as kubeadm writes it",
			file: header + `authentication:
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
  webhook:
    enabled: true
    cacheTTL: 1m
  anonymous:
    enabled: false
authorization:
  mode: Webhook
  webhook:
    cacheAuthorizedTTL: 10m
    cacheUnauthorizedTTL: 0s
`,
			args: []string{"--kubeconfig=/etc/kubernetes/kubelet.conf"},
			want: Serving{Port: DefaultClusterPort, ClientCAFile: "/etc/kubernetes/pki/ca.crt",
				WebhookAuthentication: ptr.To(true), WebhookCacheTTL: time.Minute, AuthorizationMode: webhook,
				AuthorizedCacheTTL: 10 * time.Minute, UnauthorizedCacheTTL: DefaultUnauthorizedCacheTTL},
		},
		{
			name: "flags override the file's webhooks",
			file: header + "authentication:\n  webhook:\n    enabled: true\nauthorization:\n  mode: Webhook\n",
			args: []string{"--authentication-token-webhook=false", "--authorization-mode=AlwaysAllow",
				"--authentication-token-webhook-cache-ttl=10s", "--authorization-webhook-cache-authorized-ttl=1m",
				"--authorization-webhook-cache-unauthorized-ttl=1s"},
			want: Serving{WebhookAuthentication: ptr.To(false), WebhookCacheTTL: 10 * time.Second, AuthorizationMode: alwaysAllow,
				AuthorizedCacheTTL: time.Minute, UnauthorizedCacheTTL: time.Second},
		},
		{
			name: "webhooks by flags alone",
			args: []string{"--kubeconfig=/etc/kubernetes/kubelet.conf", "--authentication-token-webhook", "--authorization-mode=Webhook"},
			want: Serving{Port: DefaultClusterPort, WebhookAuthentication: ptr.To(true), WebhookCacheTTL: DefaultWebhookCacheTTL,
				AuthorizationMode: webhook, AuthorizedCacheTTL: DefaultAuthorizedCacheTTL, UnauthorizedCacheTTL: DefaultUnauthorizedCacheTTL},
		},
		{
			name:    "a secure port with no way to authenticate",
			args:    []string{"--port=10250"},
			wantErr: "port (--port): the secure API serves authenticated callers only and has no way to authenticate any",
		},
		{
			name:    "anonymous callers",
			file:    header + "authentication:\n  anonymous:\n    enabled: true\n",
			wantErr: "authentication.anonymous.enabled: berth never serves anonymous callers",
		},
		{
			name:    "an unknown authorization mode",
			file:    header + "authorization:\n  mode: RBAC\n",
			wantErr: `authorization.mode (--authorization-mode): "RBAC" is not one of AlwaysAllow, Webhook`,
		},
		{
			name:    "a negative cache TTL",
			file:    header + "authentication:\n  webhook:\n    cacheTTL: -1m\n",
			wantErr: "authentication.webhook.cacheTTL (--authentication-token-webhook-cache-ttl): -1m0s is negative",
		},
		{
			name:    "a negative cache TTL by flag",
			args:    []string{"--authorization-webhook-cache-unauthorized-ttl=-1s"},
			wantErr: "authorization.webhook.cacheUnauthorizedTTL (--authorization-webhook-cache-unauthorized-ttl): -1s is negative",
		},
		{
			name:    "the token webhook without an API server",
			args:    []string{"--port=10250", "--client-ca-file=/pki/ca.crt", "--authentication-token-webhook"},
			wantErr: "authentication.webhook.enabled (--authentication-token-webhook): checking tokens with the API server needs one, and berth has none: set --kubeconfig",
		},
		{
			name:    "Webhook authorization without an API server",
			file:    header + "port: 10250\nauthentication:\n  x509:\n    clientCAFile: /pki/ca.crt\nauthorization:\n  mode: Webhook\n",
			wantErr: "authorization.mode (--authorization-mode): Webhook asks the API server, and berth has none: set --kubeconfig, or use AlwaysAllow",
		},
		{
			name:    "a certificate without its key",
			args:    []string{"--tls-cert-file=/pki/berth.crt"},
			wantErr: "tlsCertFile (--tls-cert-file): tlsCertFile (--tls-cert-file) and tlsPrivateKeyFile (--tls-private-key-file) go together",
		},
		{
			name:    "the read-only port beyond loopback",
			args:    []string{"--address=0.0.0.0"},
			wantErr: "readOnlyPort (--read-only-port): the read-only API has no TLS and no authentication, so it listens on loopback only",
		},
		{
			name: "only the secure port beyond loopback",
			args: []string{"--address=0.0.0.0", "--read-only-port=0", "--port=10250", "--token-auth-file=/t.csv"},
			want: standalone(Serving{Port: 10250, TokenAuthFile: "/t.csv"}),
		},
		{
			name:    "the same port twice",
			args:    []string{"--read-only-port=10250", "--port=10250", "--token-auth-file=/t.csv"},
			wantErr: "port (--port): 10250 is also the read-only port",
		},
		{
			name:    "out of range",
			args:    []string{"--port=70000"},
			wantErr: "port (--port): 70000 is out of range",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := tt.file
			if file == "" {
				file = header
			}
			cfg, err := loadWith(t, file, tt.args, testHost)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// Load does it already once it is wired; it changes nothing
			// the second time.
			cfg.Serving.defaultDelegation(cfg.Cluster.KubeconfigPath)
			if !reflect.DeepEqual(cfg.Serving, tt.want) {
				t.Errorf("Serving = %+v, want %+v", cfg.Serving, tt.want)
			}
			if cfg.Kubelet.Port != tt.want.Port || cfg.Kubelet.Authentication.X509.ClientCAFile != tt.want.ClientCAFile {
				t.Errorf("Kubelet not updated: port %d, clientCAFile %q", cfg.Kubelet.Port, cfg.Kubelet.Authentication.X509.ClientCAFile)
			}
		})
	}
}

func TestDefaultDelegation(t *testing.T) {
	kubeletTTLs := func(s Serving) Serving {
		s.WebhookCacheTTL, s.AuthorizedCacheTTL, s.UnauthorizedCacheTTL =
			DefaultWebhookCacheTTL, DefaultAuthorizedCacheTTL, DefaultUnauthorizedCacheTTL
		return s
	}
	tests := []struct {
		name       string
		kubeconfig string
		in, want   Serving
	}{
		{name: "standalone", want: kubeletTTLs(Serving{WebhookAuthentication: ptr.To(false), AuthorizationMode: alwaysAllow})},
		{name: "in a cluster, the kubelet's defaults", kubeconfig: "/etc/kubernetes/kubelet.conf",
			want: kubeletTTLs(Serving{WebhookAuthentication: ptr.To(true), AuthorizationMode: webhook})},
		{name: "in a cluster, what was set stays", kubeconfig: "/etc/kubernetes/kubelet.conf",
			in: Serving{WebhookAuthentication: ptr.To(false), AuthorizationMode: alwaysAllow, WebhookCacheTTL: time.Second,
				AuthorizedCacheTTL: time.Hour, UnauthorizedCacheTTL: time.Millisecond},
			want: Serving{WebhookAuthentication: ptr.To(false), AuthorizationMode: alwaysAllow, WebhookCacheTTL: time.Second,
				AuthorizedCacheTTL: time.Hour, UnauthorizedCacheTTL: time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in
			got.defaultDelegation(tt.kubeconfig)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// In a cluster the token webhook alone authenticates callers; without an
// API server nothing may ask one, but a secure API that is off asks
// nothing.
func TestValidateDelegation(t *testing.T) {
	tests := []struct {
		name       string
		kubeconfig string
		serving    Serving
		wantErr    []string
	}{
		{name: "a cluster node with the kubelet's defaults", kubeconfig: "/kubelet.conf", serving: Serving{Port: 10250}},
		{name: "a standalone node with berth's defaults", serving: Serving{Port: 10250, ClientCAFile: "/ca.crt"}},
		{name: "both webhooks without an API server",
			serving: Serving{Port: 10250, WebhookAuthentication: ptr.To(true), AuthorizationMode: webhook},
			wantErr: []string{"authentication.webhook.enabled (--authentication-token-webhook): checking tokens with the API server needs one",
				"authorization.mode (--authorization-mode): Webhook asks the API server"}},
		{name: "webhooks without an API server, the secure API off",
			serving: Serving{WebhookAuthentication: ptr.To(true), AuthorizationMode: webhook}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Config{Address: DefaultAddress, ReadOnlyPort: DefaultReadOnlyPort, Serving: tt.serving,
				Cluster: Cluster{KubeconfigPath: tt.kubeconfig}}
			c.Serving.defaultDelegation(tt.kubeconfig)
			errs := c.validateServing()
			if len(errs) != len(tt.wantErr) {
				t.Fatalf("errors %v, want %d", errs, len(tt.wantErr))
			}
			for i, want := range tt.wantErr {
				if !strings.Contains(errs[i].Error(), want) {
					t.Errorf("error %q does not say %q", errs[i], want)
				}
			}
		})
	}
}

func TestWriteBackServing(t *testing.T) {
	s := Serving{Port: 10250, TLSCertFile: "/c", TLSPrivateKeyFile: "/k", ClientCAFile: "/ca"}
	s.defaultDelegation("/kubelet.conf")
	kc := &kubeletconfigv1beta1.KubeletConfiguration{}
	writeBackServing(kc, s)
	a, z := kc.Authentication, kc.Authorization
	if kc.Port != 10250 || kc.TLSCertFile != "/c" || kc.TLSPrivateKeyFile != "/k" || a.X509.ClientCAFile != "/ca" ||
		!ptr.Deref(a.Webhook.Enabled, false) || a.Webhook.CacheTTL.Duration != DefaultWebhookCacheTTL ||
		ptr.Deref(a.Anonymous.Enabled, true) || z.Mode != webhook ||
		z.Webhook.CacheAuthorizedTTL.Duration != DefaultAuthorizedCacheTTL ||
		z.Webhook.CacheUnauthorizedTTL.Duration != DefaultUnauthorizedCacheTTL {
		t.Errorf("written back: %+v %+v %+v", kc.Port, a, z)
	}
}
