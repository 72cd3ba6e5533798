package config

import (
	"fmt"
	"net"

	"github.com/spf13/pflag"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Serving is the secure API, the counterpart of the kubelet's port 10250:
// the read-only API plus exec and attach, over TLS, for authenticated
// callers only. Unlike the kubelet's, it is off unless a port is given: the
// berth CLI on the node uses the root-only admin socket and needs no port.
type Serving struct {
	// Port is the secure API's port (port); 0 turns it off.
	Port int32
	// TLSCertFile and TLSPrivateKeyFile are the serving certificate and key
	// (tlsCertFile, tlsPrivateKeyFile). Without them berth makes a
	// self-signed certificate under its root dir and logs its fingerprint.
	TLSCertFile       string
	TLSPrivateKeyFile string
	// ClientCAFile authenticates callers by client certificates signed by
	// one of its CAs (authentication.x509.clientCAFile).
	ClientCAFile string
	// TokenAuthFile authenticates callers by bearer tokens, one
	// "token,user,uid,groups" CSV line each, the API server's
	// --token-auth-file format.
	TokenAuthFile string
}

const (
	flagPort              = "port"
	flagTLSCertFile       = "tls-cert-file"
	flagTLSPrivateKeyFile = "tls-private-key-file"
	flagClientCAFile      = "client-ca-file"
	flagTokenAuthFile     = "token-auth-file"

	namePort              = "port (--" + flagPort + ")"
	nameTLSCertFile       = "tlsCertFile (--" + flagTLSCertFile + ")"
	nameTLSPrivateKeyFile = "tlsPrivateKeyFile (--" + flagTLSPrivateKeyFile + ")"
	nameClientCAFile      = "authentication.x509.clientCAFile (--" + flagClientCAFile + ")"
	nameTokenAuthFile     = "--" + flagTokenAuthFile
	nameAnonymous         = "authentication.anonymous.enabled"
)

func addServingFlags(fs *pflag.FlagSet) {
	fs.Int32(flagPort, 0, "port of the secure API (TLS, authenticated callers only; serves exec and attach); 0 turns it off")
	fs.String(flagTLSCertFile, "", "serving certificate of the secure API (default: a self-signed one under <root-dir>/pki)")
	fs.String(flagTLSPrivateKeyFile, "", "private key of --"+flagTLSCertFile)
	fs.String(flagClientCAFile, "", "CA bundle: callers of the secure API with a client certificate it signed are authenticated")
	fs.String(flagTokenAuthFile, "", "bearer tokens of the secure API's callers, one token,user,uid,\"group1,group2\" line each")
}

// applyServingFile copies the file's secure API fields; anonymous callers,
// which the kubelet can be told to serve, are refused outright.
func applyServingFile(s *Serving, kc *kubeletconfigv1beta1.KubeletConfiguration, set map[string]bool) error {
	if set["port"] {
		s.Port = kc.Port
	}
	if kc.TLSCertFile != "" {
		s.TLSCertFile = kc.TLSCertFile
	}
	if kc.TLSPrivateKeyFile != "" {
		s.TLSPrivateKeyFile = kc.TLSPrivateKeyFile
	}
	if kc.Authentication.X509.ClientCAFile != "" {
		s.ClientCAFile = kc.Authentication.X509.ClientCAFile
	}
	if a := kc.Authentication.Anonymous.Enabled; a != nil && *a {
		return fmt.Errorf("%s: berth never serves anonymous callers; set it to false or leave it out", nameAnonymous)
	}
	return nil
}

func applyServingFlags(s *Serving, fs *pflag.FlagSet) []error {
	return []error{
		override(fs, flagPort, fs.GetInt32, &s.Port),
		override(fs, flagTLSCertFile, fs.GetString, &s.TLSCertFile),
		override(fs, flagTLSPrivateKeyFile, fs.GetString, &s.TLSPrivateKeyFile),
		override(fs, flagClientCAFile, fs.GetString, &s.ClientCAFile),
		override(fs, flagTokenAuthFile, fs.GetString, &s.TokenAuthFile),
	}
}

// validateServing checks the secure API and the rule that nothing
// unauthenticated listens beyond loopback.
func (c *Config) validateServing() []error {
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
	}
	s := c.Serving
	if ip := net.ParseIP(c.Address); ip != nil && !ip.IsLoopback() && c.ReadOnlyPort != 0 {
		bad(nameReadOnlyPort, "the read-only API has no TLS and no authentication, so it listens on loopback only, "+
			"and %s is %s; set readOnlyPort: 0 (--%s=0) and use the secure API (%s)",
			nameAddress, c.Address, flagReadOnlyPort, namePort)
	}
	if s.Port < 0 || s.Port > 65535 {
		bad(namePort, "%d is out of range 0-65535 (0 turns the secure API off)", s.Port)
	}
	if (s.TLSCertFile == "") != (s.TLSPrivateKeyFile == "") {
		bad(nameTLSCertFile, "%s and %s go together: set both or neither", nameTLSCertFile, nameTLSPrivateKeyFile)
	}
	if s.Port == 0 {
		return errs
	}
	if s.Port == c.ReadOnlyPort {
		bad(namePort, "%d is also the read-only port", s.Port)
	}
	if s.ClientCAFile == "" && s.TokenAuthFile == "" {
		bad(namePort, "the secure API serves authenticated callers only and has no way to authenticate any: "+
			"set %s or %s", nameClientCAFile, nameTokenAuthFile)
	}
	return errs
}
