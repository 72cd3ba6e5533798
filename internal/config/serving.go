package config

import (
	"fmt"
	"net"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

// The kubelet's cache TTLs for the answers of its webhooks.
const (
	DefaultWebhookCacheTTL      = 2 * time.Minute
	DefaultAuthorizedCacheTTL   = 5 * time.Minute
	DefaultUnauthorizedCacheTTL = 30 * time.Second
)

// Serving is the secure API, the counterpart of the kubelet's port 10250:
// the read-only API plus exec, attach and port-forward, over TLS, for
// authenticated callers only, authorized by the API server in a cluster. Unlike the kubelet's, it is off unless a port is given: the
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

	// WebhookAuthentication asks the API server about the bearer tokens
	// that are not in the token file, with a TokenReview
	// (authentication.webhook.enabled, --authentication-token-webhook).
	// nil until DefaultDelegation: neither the file nor a flag set it.
	WebhookAuthentication *bool
	// WebhookCacheTTL is how long the API server's answer about a token is
	// kept (authentication.webhook.cacheTTL).
	WebhookCacheTTL time.Duration
	// AuthorizationMode is AlwaysAllow, every authenticated caller may do
	// everything, or Webhook, the API server decides each request with a
	// SubjectAccessReview (authorization.mode, --authorization-mode).
	// Empty until DefaultDelegation.
	AuthorizationMode kubeletconfigv1beta1.KubeletAuthorizationMode
	// AuthorizedCacheTTL and UnauthorizedCacheTTL are how long the API
	// server's answers are kept (authorization.webhook.cacheAuthorizedTTL
	// and cacheUnauthorizedTTL).
	AuthorizedCacheTTL   time.Duration
	UnauthorizedCacheTTL time.Duration
}

const (
	flagPort              = "port"
	flagTLSCertFile       = "tls-cert-file"
	flagTLSPrivateKeyFile = "tls-private-key-file"
	flagClientCAFile      = "client-ca-file"
	flagTokenAuthFile     = "token-auth-file"
	flagWebhookAuthn      = "authentication-token-webhook"
	flagWebhookCacheTTL   = "authentication-token-webhook-cache-ttl"
	flagAuthorizationMode = "authorization-mode"
	flagAuthorizedTTL     = "authorization-webhook-cache-authorized-ttl"
	flagUnauthorizedTTL   = "authorization-webhook-cache-unauthorized-ttl"

	namePort              = "port (--" + flagPort + ")"
	nameTLSCertFile       = "tlsCertFile (--" + flagTLSCertFile + ")"
	nameTLSPrivateKeyFile = "tlsPrivateKeyFile (--" + flagTLSPrivateKeyFile + ")"
	nameClientCAFile      = "authentication.x509.clientCAFile (--" + flagClientCAFile + ")"
	nameTokenAuthFile     = "--" + flagTokenAuthFile
	nameAnonymous         = "authentication.anonymous.enabled"
	nameWebhookAuthn      = "authentication.webhook.enabled (--" + flagWebhookAuthn + ")"
	nameWebhookCacheTTL   = "authentication.webhook.cacheTTL (--" + flagWebhookCacheTTL + ")"
	nameAuthorizationMode = "authorization.mode (--" + flagAuthorizationMode + ")"
	nameAuthorizedTTL     = "authorization.webhook.cacheAuthorizedTTL (--" + flagAuthorizedTTL + ")"
	nameUnauthorizedTTL   = "authorization.webhook.cacheUnauthorizedTTL (--" + flagUnauthorizedTTL + ")"
)

func addServingFlags(fs *pflag.FlagSet) {
	fs.Int32(flagPort, 0, "port of the secure API (TLS, authenticated callers only; serves exec and attach); 0 turns it off")
	fs.String(flagTLSCertFile, "", "serving certificate of the secure API (default: a self-signed one under <root-dir>/pki)")
	fs.String(flagTLSPrivateKeyFile, "", "private key of --"+flagTLSCertFile)
	fs.String(flagClientCAFile, "", "CA bundle: callers of the secure API with a client certificate it signed are authenticated")
	fs.String(flagTokenAuthFile, "", "bearer tokens of the secure API's callers, one token,user,uid,\"group1,group2\" line each")
	fs.Bool(flagWebhookAuthn, false, "ask the API server about bearer tokens of the secure API's callers (TokenReview) "+
		"(default: true with --"+flagKubeconfig+", as the kubelet's)")
	fs.Duration(flagWebhookCacheTTL, DefaultWebhookCacheTTL, "how long the API server's answer about a token is kept; 0 means the default")
	fs.String(flagAuthorizationMode, "", "who may do what on the secure API: AlwaysAllow (every authenticated caller, everything) or "+
		"Webhook (the API server decides, SubjectAccessReview) (default: Webhook with --"+flagKubeconfig+", else AlwaysAllow)")
	fs.Duration(flagAuthorizedTTL, DefaultAuthorizedCacheTTL, "how long the API server's allowing answers are kept; 0 means the default")
	fs.Duration(flagUnauthorizedTTL, DefaultUnauthorizedCacheTTL, "how long the API server's other answers are kept; 0 means the default")
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
	if e := kc.Authentication.Webhook.Enabled; e != nil {
		s.WebhookAuthentication = ptr.To(*e)
	}
	if kc.Authorization.Mode != "" {
		s.AuthorizationMode = kc.Authorization.Mode
	}
	// A zero duration is the default, as the kubelet's defaulting has it.
	for _, d := range []struct {
		value time.Duration
		dst   *time.Duration
	}{
		{kc.Authentication.Webhook.CacheTTL.Duration, &s.WebhookCacheTTL},
		{kc.Authorization.Webhook.CacheAuthorizedTTL.Duration, &s.AuthorizedCacheTTL},
		{kc.Authorization.Webhook.CacheUnauthorizedTTL.Duration, &s.UnauthorizedCacheTTL},
	} {
		if d.value != 0 {
			*d.dst = d.value
		}
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
		overridePtr(fs, flagWebhookAuthn, fs.GetBool, &s.WebhookAuthentication),
		override(fs, flagWebhookCacheTTL, fs.GetDuration, &s.WebhookCacheTTL),
		override(fs, flagAuthorizationMode, func(name string) (kubeletconfigv1beta1.KubeletAuthorizationMode, error) {
			v, err := fs.GetString(name)
			return kubeletconfigv1beta1.KubeletAuthorizationMode(v), err
		}, &s.AuthorizationMode),
		override(fs, flagAuthorizedTTL, fs.GetDuration, &s.AuthorizedCacheTTL),
		override(fs, flagUnauthorizedTTL, fs.GetDuration, &s.UnauthorizedCacheTTL),
	}
}

// overridePtr sets *dst to the named flag's value when the user gave it,
// for settings whose absence means something.
func overridePtr[T any](fs *pflag.FlagSet, name string, get func(string) (T, error), dst **T) error {
	if !fs.Changed(name) {
		return nil
	}
	v, err := get(name)
	if err != nil {
		return fmt.Errorf("--%s: %w", name, err)
	}
	*dst = &v
	return nil
}

// defaultDelegation fills what the file and the flags left unset of the
// API server's part in the secure API, once it is known whether berth has
// an API server (kubeconfigPath, "" for none). With one, the kubelet's
// defaults: token webhook on, authorization mode Webhook; without one,
// berth's standalone ones: token webhook off, AlwaysAllow. load calls it
// once the flags are in, before Validate.
func (s *Serving) defaultDelegation(kubeconfigPath string) {
	cluster := kubeconfigPath != ""
	if s.WebhookAuthentication == nil {
		s.WebhookAuthentication = ptr.To(cluster)
	}
	if s.AuthorizationMode == "" {
		s.AuthorizationMode = kubeletconfigv1beta1.KubeletAuthorizationModeAlwaysAllow
		if cluster {
			s.AuthorizationMode = kubeletconfigv1beta1.KubeletAuthorizationModeWebhook
		}
	}
	for _, d := range []struct {
		dst *time.Duration
		def time.Duration
	}{
		{&s.WebhookCacheTTL, DefaultWebhookCacheTTL},
		{&s.AuthorizedCacheTTL, DefaultAuthorizedCacheTTL},
		{&s.UnauthorizedCacheTTL, DefaultUnauthorizedCacheTTL},
	} {
		if *d.dst == 0 {
			*d.dst = d.def
		}
	}
}

// validateDelegation reports the secure API's settings that need an API
// server when berth has none (kubeconfigPath "").
func (s Serving) validateDelegation(kubeconfigPath string) []error {
	if kubeconfigPath != "" {
		return nil
	}
	var errs []error
	if ptr.Deref(s.WebhookAuthentication, false) {
		errs = append(errs, fmt.Errorf("%s: checking tokens with the API server needs one, and berth has none: "+
			"set %s, or turn the token webhook off", nameWebhookAuthn, nameKubeconfig))
	}
	if s.AuthorizationMode == kubeletconfigv1beta1.KubeletAuthorizationModeWebhook {
		errs = append(errs, fmt.Errorf("%s: Webhook asks the API server, and berth has none: set %s, or use %s",
			nameAuthorizationMode, nameKubeconfig, kubeletconfigv1beta1.KubeletAuthorizationModeAlwaysAllow))
	}
	return errs
}

// writeBackServing records the secure API's effective settings in the
// KubeletConfiguration.
func writeBackServing(kc *kubeletconfigv1beta1.KubeletConfiguration, s Serving) {
	kc.Port = s.Port
	kc.TLSCertFile = s.TLSCertFile
	kc.TLSPrivateKeyFile = s.TLSPrivateKeyFile
	kc.Authentication.X509.ClientCAFile = s.ClientCAFile
	kc.Authentication.Anonymous.Enabled = ptr.To(false)
	if s.WebhookAuthentication != nil {
		kc.Authentication.Webhook.Enabled = ptr.To(*s.WebhookAuthentication)
	}
	kc.Authentication.Webhook.CacheTTL = metav1.Duration{Duration: s.WebhookCacheTTL}
	kc.Authorization.Mode = s.AuthorizationMode
	kc.Authorization.Webhook.CacheAuthorizedTTL = metav1.Duration{Duration: s.AuthorizedCacheTTL}
	kc.Authorization.Webhook.CacheUnauthorizedTTL = metav1.Duration{Duration: s.UnauthorizedCacheTTL}
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
	switch s.AuthorizationMode {
	case "", kubeletconfigv1beta1.KubeletAuthorizationModeAlwaysAllow, kubeletconfigv1beta1.KubeletAuthorizationModeWebhook:
	default:
		bad(nameAuthorizationMode, "%q is not one of %s, %s", s.AuthorizationMode,
			kubeletconfigv1beta1.KubeletAuthorizationModeAlwaysAllow, kubeletconfigv1beta1.KubeletAuthorizationModeWebhook)
	}
	for _, d := range []struct {
		name  string
		value time.Duration
	}{
		{nameWebhookCacheTTL, s.WebhookCacheTTL},
		{nameAuthorizedTTL, s.AuthorizedCacheTTL},
		{nameUnauthorizedTTL, s.UnauthorizedCacheTTL},
	} {
		if d.value < 0 {
			bad(d.name, "%s is negative", d.value)
		}
	}
	if s.Port == 0 {
		return errs
	}
	errs = append(errs, s.validateDelegation(c.Cluster.KubeconfigPath)...)
	if s.Port == c.ReadOnlyPort {
		bad(namePort, "%d is also the read-only port", s.Port)
	}
	if s.ClientCAFile == "" && s.TokenAuthFile == "" && !ptr.Deref(s.WebhookAuthentication, false) {
		bad(namePort, "the secure API serves authenticated callers only and has no way to authenticate any: "+
			"set %s, %s or %s", nameClientCAFile, nameTokenAuthFile, nameWebhookAuthn)
	}
	return errs
}
