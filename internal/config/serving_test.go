package config

import (
	"strings"
	"testing"
)

func TestServing(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		args    []string
		want    Serving
		wantErr string
	}{
		{name: "off by default", want: Serving{}},
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
			want: Serving{Port: 10250, TLSCertFile: "/pki/berth.crt", TLSPrivateKeyFile: "/pki/berth.key", ClientCAFile: "/pki/ca.crt"},
		},
		{
			name: "flags override the file",
			file: header + "port: 10250\nauthentication:\n  x509:\n    clientCAFile: /pki/ca.crt\n",
			args: []string{"--port=11250", "--token-auth-file=/etc/berth/tokens.csv", "--client-ca-file=/other/ca.crt"},
			want: Serving{Port: 11250, ClientCAFile: "/other/ca.crt", TokenAuthFile: "/etc/berth/tokens.csv"},
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
			want: Serving{Port: 10250, TokenAuthFile: "/t.csv"},
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
			if cfg.Serving != tt.want {
				t.Errorf("Serving = %+v, want %+v", cfg.Serving, tt.want)
			}
			if cfg.Kubelet.Port != tt.want.Port || cfg.Kubelet.Authentication.X509.ClientCAFile != tt.want.ClientCAFile {
				t.Errorf("Kubelet not updated: port %d, clientCAFile %q", cfg.Kubelet.Port, cfg.Kubelet.Authentication.X509.ClientCAFile)
			}
		})
	}
}
