// Package credentialprovider turns a pod's imagePullSecrets into the
// registry credentials to pull an image with, as the kubelet's
// pkg/credentialprovider keyring does: every entry of every dockercfg or
// dockerconfigjson secret is keyed by registry host and optional path;
// an image matches the keys whose host (with "*" wildcards per dot-separated
// part) and port equal its registry's and whose path is a prefix of its
// repository; Docker Hub's images also match the "index.docker.io" entry.
// Everything here is pure.
package credentialprovider

import (
	"net"
	"net/url"
	"path"
	"sort"
	"strings"

	"github.com/distribution/reference"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// defaultRegistryHost is the key Docker Hub credentials are stored under,
// whichever of its spellings the secret used
// ("https://index.docker.io/v1/", "index.docker.io").
const defaultRegistryHost = "index.docker.io"

// Keyring holds registry credentials by key (host, or host/path).
type Keyring struct {
	// index lists the keys in reverse lexical order, so that a longer key
	// (a path under a registry) comes before the registry's own.
	index []string
	creds map[string][]*runtimeapi.AuthConfig
}

// Add stores the entries of one docker config under their keys, after
// those already there. An entry whose key is not a URL is skipped, as the
// kubelet skips it.
func (k *Keyring) Add(cfg DockerConfig) {
	if k.creds == nil {
		k.creds = map[string][]*runtimeapi.AuthConfig{}
	}
	// Map order is random; sorting keeps the order of credentials under a
	// key stable from one pull to the next.
	locs := make([]string, 0, len(cfg))
	for loc := range cfg {
		locs = append(locs, loc)
	}
	sort.Strings(locs)
	for _, loc := range locs {
		key, ok := registryKey(loc)
		if !ok {
			continue
		}
		entry := cfg[loc]
		if _, seen := k.creds[key]; !seen {
			k.index = append(k.index, key)
		}
		k.creds[key] = append(k.creds[key], &runtimeapi.AuthConfig{Username: entry.Username, Password: entry.Password})
	}
	sort.Sort(sort.Reverse(sort.StringSlice(k.index)))
}

// registryKey is the kubelet's key for a docker config location: host, plus
// the path when there is one that is not Docker's "/v1/" or "/v2/" API
// prefix ("https://index.docker.io/v1/" is "index.docker.io",
// "registry.example.com/team" is "registry.example.com/team").
func registryKey(loc string) (string, bool) {
	value := loc
	if !strings.HasPrefix(value, "https://") && !strings.HasPrefix(value, "http://") {
		value = "https://" + value
	}
	parsed, err := url.Parse(value)
	if err != nil {
		return "", false
	}
	p := parsed.Path
	if strings.HasPrefix(p, "/v2/") || strings.HasPrefix(p, "/v1/") {
		p = p[3:]
	}
	if p != "" && p != "/" {
		return parsed.Host + p, true
	}
	return parsed.Host, true
}

// Lookup returns the credentials that match repo (a normalized repository
// name such as "docker.io/library/nginx" or "registry.example.com:5000/app",
// no tag), most specific key first; none when nothing matches.
func (k *Keyring) Lookup(repo string) []*runtimeapi.AuthConfig {
	var out []*runtimeapi.AuthConfig
	for _, key := range k.index {
		if urlsMatch(key, repo) {
			out = append(out, k.creds[key]...)
		}
	}
	if len(out) > 0 {
		return out
	}
	if isDefaultRegistryMatch(repo) {
		return k.creds[defaultRegistryHost]
	}
	return nil
}

// isDefaultRegistryMatch reports whether repo lives on Docker Hub: no
// registry part, "docker.io" or "index.docker.io", or a first part that
// cannot be a host (no dot, no port).
func isDefaultRegistryMatch(repo string) bool {
	first, _, hasRest := strings.Cut(repo, "/")
	switch {
	case first == "":
		return false
	case !hasRest:
		return true
	case first == "docker.io" || first == "index.docker.io":
		return true
	}
	return !strings.ContainsAny(first, ".:")
}

// urlsMatch is the kubelet's URLsMatch on schemeless URLs: same port, same
// number of host parts each matching as a glob ("*.example.com"), and the
// glob's path a prefix of the target's (a plain string prefix, as in the
// kubelet: "host/team" also matches "host/teammate").
func urlsMatch(glob, target string) bool {
	g, err := url.Parse("https://" + glob)
	if err != nil {
		return false
	}
	t, err := url.Parse("https://" + target)
	if err != nil {
		return false
	}
	gParts, gPort := splitHost(g.Host)
	tParts, tPort := splitHost(t.Host)
	if gPort != tPort || len(gParts) != len(tParts) {
		return false
	}
	if !strings.HasPrefix(t.Path, g.Path) {
		return false
	}
	for i := range gParts {
		// path.Match, not filepath.Match: the parts never hold a
		// separator, and the pattern syntax is the same on every OS.
		if ok, err := path.Match(gParts[i], tParts[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

func splitHost(hostport string) (parts []string, port string) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, ""
	}
	return strings.Split(host, "."), port
}

// Credentials returns the credentials to try, in order, to pull image
// (as a pod spells it: "nginx", "registry:5000/app:1.0", "x@sha256:...");
// none means an anonymous pull.
func Credentials(image string, k *Keyring) ([]*runtimeapi.AuthConfig, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return nil, err
	}
	if k == nil {
		return nil, nil
	}
	return k.Lookup(named.Name()), nil
}
