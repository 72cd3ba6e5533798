package credentialprovider

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// DockerConfig is a .dockercfg file, and the "auths" of a config.json:
// credentials by registry location.
type DockerConfig map[string]DockerConfigEntry

// DockerConfigJSON is a .docker/config.json file.
type DockerConfigJSON struct {
	Auths DockerConfig `json:"auths"`
}

// DockerConfigEntry is one registry's credentials. "auth", when set, is
// base64("user:password") and wins over the separate fields.
type DockerConfigEntry struct {
	Username string
	Password string
}

// UnmarshalJSON reads username and password, or decodes auth.
func (e *DockerConfigEntry) UnmarshalJSON(data []byte) error {
	var raw struct {
		Username string `json:"username,omitempty"`
		Password string `json:"password,omitempty"`
		Auth     string `json:"auth,omitempty"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	e.Username, e.Password = raw.Username, raw.Password
	if raw.Auth == "" {
		return nil
	}
	user, pass, err := decodeAuth(raw.Auth)
	if err != nil {
		return err
	}
	e.Username, e.Password = user, pass
	return nil
}

// decodeAuth decodes base64("user:password"), padded or not.
func decodeAuth(field string) (user, pass string, err error) {
	enc := base64.RawStdEncoding
	if strings.HasSuffix(strings.TrimSpace(field), "=") {
		enc = base64.StdEncoding
	}
	decoded, err := enc.DecodeString(field)
	if err != nil {
		return "", "", fmt.Errorf("decoding auth field: %w", err)
	}
	user, pass, ok := strings.Cut(string(decoded), ":")
	if !ok {
		return "", "", fmt.Errorf("unable to parse auth field, must be formatted as base64(username:password)")
	}
	return user, pass, nil
}

// KeyringFromSecrets builds the keyring of a pod's pull secrets, in the
// pod's order. Secrets of other types, or without their key, are ignored
// as the kubelet ignores them; a secret whose config does not parse is an
// error naming it.
func KeyringFromSecrets(secrets []*v1.Secret) (*Keyring, error) {
	k := &Keyring{}
	for _, s := range secrets {
		switch {
		case s.Type == v1.SecretTypeDockerConfigJson && len(s.Data[v1.DockerConfigJsonKey]) > 0:
			var cfg DockerConfigJSON
			if err := json.Unmarshal(s.Data[v1.DockerConfigJsonKey], &cfg); err != nil {
				return nil, fmt.Errorf("secret %q: %s: %w", s.Name, v1.DockerConfigJsonKey, err)
			}
			k.Add(cfg.Auths)
		case s.Type == v1.SecretTypeDockercfg && len(s.Data[v1.DockerConfigKey]) > 0:
			var cfg DockerConfig
			if err := json.Unmarshal(s.Data[v1.DockerConfigKey], &cfg); err != nil {
				return nil, fmt.Errorf("secret %q: %s: %w", s.Name, v1.DockerConfigKey, err)
			}
			k.Add(cfg)
		}
	}
	return k, nil
}
