package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

const kindKubeletConfiguration = "KubeletConfiguration"

// kubeletFile is a decoded configuration file: the typed configuration and
// the top-level fields it sets, which the typed form cannot tell apart from
// fields left at their zero value.
type kubeletFile struct {
	config *kubeletconfigv1beta1.KubeletConfiguration
	set    map[string]bool
}

// readFile reads and strictly decodes a KubeletConfiguration file.
func readFile(path string) (*kubeletFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the configuration file: %w", err)
	}
	kf, err := decodeFile(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return kf, nil
}

// decodeFile decodes YAML or JSON. Unknown and duplicate fields are errors,
// as the kubelet's own strict loader has them.
func decodeFile(data []byte) (*kubeletFile, error) {
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, err
	}
	if raw == nil {
		return nil, fmt.Errorf("the file is empty; want apiVersion %s, kind %s",
			kubeletconfigv1beta1.SchemeGroupVersion, kindKubeletConfiguration)
	}
	// The type is checked here rather than left to the decoder, whose
	// messages name the scheme instead of saying what was expected.
	apiVersion, _ := raw["apiVersion"].(string)
	kind, _ := raw["kind"].(string)
	if apiVersion != kubeletconfigv1beta1.SchemeGroupVersion.String() || kind != kindKubeletConfiguration {
		return nil, fmt.Errorf("apiVersion %q, kind %q: want apiVersion %s, kind %s",
			apiVersion, kind, kubeletconfigv1beta1.SchemeGroupVersion, kindKubeletConfiguration)
	}

	decoder, err := strictDecoder()
	if err != nil {
		return nil, err
	}
	obj, _, err := decoder.Decode(data, nil, nil)
	if err != nil {
		if runtime.IsStrictDecodingError(err) {
			return nil, err
		}
		return nil, attributeDecodeError(decoder, raw, err)
	}
	kc, ok := obj.(*kubeletconfigv1beta1.KubeletConfiguration)
	if !ok {
		return nil, fmt.Errorf("decoded a %T, want a KubeletConfiguration", obj)
	}

	set := make(map[string]bool, len(raw))
	for field, value := range raw {
		if field != "apiVersion" && field != "kind" && !emptyValue(value) {
			set[field] = true
		}
	}
	return &kubeletFile{config: kc, set: set}, nil
}

// emptyValue reports whether a field's value sets nothing: null, {} or [],
// which generated files (kubeadm's, for one) write for every section.
func emptyValue(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(v) == 0
	case []any:
		return len(v) == 0
	}
	return false
}

func strictDecoder() (runtime.Decoder, error) {
	scheme := runtime.NewScheme()
	if err := kubeletconfigv1beta1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("registering the KubeletConfiguration type: %w", err)
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer(), nil
}

// attributeDecodeError finds which fields a decode error comes from. Some
// value errors (an unparsable duration, for one) do not say which field they
// are about, so each top-level field is decoded on its own; only on this
// error path.
func attributeDecodeError(decoder runtime.Decoder, raw map[string]any, cause error) error {
	fields := make([]string, 0, len(raw))
	for field := range raw {
		if field != "apiVersion" && field != "kind" {
			fields = append(fields, field)
		}
	}
	slices.Sort(fields)

	var errs []error
	for _, field := range fields {
		single, err := json.Marshal(map[string]any{
			"apiVersion": raw["apiVersion"],
			"kind":       raw["kind"],
			field:        raw[field],
		})
		if err != nil {
			continue
		}
		if _, _, err := decoder.Decode(single, nil, nil); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", field, err))
		}
	}
	if len(errs) == 0 {
		return cause
	}
	return errors.Join(errs...)
}
