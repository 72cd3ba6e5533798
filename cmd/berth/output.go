package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The values of -o. The default ("") is each command's own human output:
// a table or a description.
const (
	outputWide = "wide"
	outputJSON = "json"
	outputYAML = "yaml"
	outputName = "name"
)

// enumValue is a string flag that takes one of a fixed set of values, so
// that a bad value is a flag error naming the choices, before the command
// runs (and exits with the usage code).
type enumValue struct {
	value   *string
	allowed []string
}

func (e *enumValue) String() string { return *e.value }
func (e *enumValue) Type() string   { return "string" }

func (e *enumValue) Set(s string) error {
	if !slices.Contains(e.allowed, s) {
		return fmt.Errorf("want %s", orList(e.allowed))
	}
	*e.value = s
	return nil
}

// orList joins choices as "a, b or c".
func orList(choices []string) string {
	if len(choices) < 2 {
		return strings.Join(choices, "")
	}
	return strings.Join(choices[:len(choices)-1], ", ") + " or " + choices[len(choices)-1]
}

// addOutputFlag registers -o/--output taking formats, with their shell
// completion; what says what the default output is.
func addOutputFlag(cmd *cobra.Command, dst *string, what string, formats ...string) {
	cmd.Flags().VarP(&enumValue{value: dst, allowed: formats}, "output", "o",
		fmt.Sprintf("output format: %s (default: %s)", orList(formats), what))
	// Registering completion for a flag just added cannot fail.
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp))
}

// writeStructured writes v as JSON or YAML, the way kubectl prints objects:
// JSON indented by four spaces, YAML by sigs.k8s.io/yaml (through the JSON
// field names, so both show the same fields).
func writeStructured(w io.Writer, format string, v any) error {
	var (
		data []byte
		err  error
	)
	switch format {
	case outputJSON:
		data, err = json.MarshalIndent(v, "", "    ")
		data = append(data, '\n')
	case outputYAML:
		data, err = yaml.Marshal(v)
	default:
		return fmt.Errorf("cannot write %q output", format)
	}
	if err != nil {
		return fmt.Errorf("encoding %s output: %w", format, err)
	}
	_, err = w.Write(data)
	return err
}

// typedPod is pod with its kind and version set, as an API server returns
// a single object; the local API's lists do not repeat them per item.
func typedPod(pod *v1.Pod) *v1.Pod {
	p := pod.DeepCopy()
	p.TypeMeta.APIVersion, p.TypeMeta.Kind = "v1", "Pod"
	return p
}

// typedPodList is a PodList of pods, each typed, for -o json or yaml.
func typedPodList(pods []*v1.Pod) *v1.PodList {
	list := &v1.PodList{Items: make([]v1.Pod, 0, len(pods))}
	list.APIVersion, list.Kind = "v1", "PodList"
	for _, p := range pods {
		list.Items = append(list.Items, *typedPod(p))
	}
	return list
}
