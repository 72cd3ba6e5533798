package podsource

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// document is one YAML document of a manifest file.
type document struct {
	data []byte
	line int // the file line the document's text starts on, 1-based
}

// splitDocuments cuts a file at its "---" lines, as the kubelet's YAML reader
// does, remembering where each document starts so errors can point into the
// file. JSON is YAML, so a JSON file is one document.
func splitDocuments(data []byte) []document {
	var docs []document
	start, startLine, line := 0, 1, 1
	for off := 0; off < len(data); line++ {
		end := len(data)
		if i := bytes.IndexByte(data[off:], '\n'); i >= 0 {
			end = off + i + 1
		}
		if isSeparator(data[off:end]) {
			docs = append(docs, document{data: data[start:off], line: startLine})
			start, startLine = end, line+1
		}
		off = end
	}
	return append(docs, document{data: data[start:], line: startLine})
}

// isSeparator: "---" alone on its line, or followed by a comment.
func isSeparator(line []byte) bool {
	rest, ok := bytes.CutPrefix(line, []byte("---"))
	if !ok {
		return false
	}
	rest = bytes.TrimSpace(rest)
	return len(rest) == 0 || rest[0] == '#'
}

// contentLine is the file line of the document's first line that is neither
// blank nor a comment; 0 when there is none.
func (d document) contentLine() int {
	for i, l := range bytes.Split(d.data, []byte("\n")) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' {
			return d.line + i
		}
	}
	return 0
}

// hint is what a document says about its pod's identity, read leniently so
// that even a broken manifest's error can name the pod.
type hint struct {
	Name, Namespace string
}

// decodeDocument decodes one document into a pod, strictly: a duplicated or
// unknown field is an error naming it, and anything but a v1 Pod is refused.
// An empty document yields neither pod nor error.
func decodeDocument(doc document) (*v1.Pod, hint, error) {
	js, err := yaml.YAMLToJSONStrict(doc.data)
	if err != nil {
		return nil, hint{}, yamlError(err, doc.line)
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return nil, hint{}, nil
	}
	if kind := jsonKind(js); kind != "mapping" {
		return nil, hint{}, fmt.Errorf("expected a Pod, found a %s", kind)
	}
	h := readHint(js)
	var tm metav1.TypeMeta
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(js, &tm); err != nil {
		return nil, h, err
	}
	var errs field.ErrorList
	switch {
	case tm.APIVersion == "":
		errs = append(errs, field.Required(field.NewPath("apiVersion"), ""))
	case tm.APIVersion != "v1":
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), tm.APIVersion, []string{"v1"}))
	}
	switch {
	case tm.Kind == "":
		errs = append(errs, field.Required(field.NewPath("kind"), ""))
	case tm.Kind != "Pod":
		errs = append(errs, field.NotSupported(field.NewPath("kind"), tm.Kind, []string{"Pod"}))
	}
	if len(errs) > 0 {
		return nil, h, FieldErrors(errs)
	}
	pod := &v1.Pod{}
	strict, err := sigsjson.UnmarshalStrict(js, pod, sigsjson.DisallowUnknownFields)
	if err != nil {
		return nil, h, err
	}
	if len(strict) > 0 {
		return nil, h, utilerrors.NewAggregate(strict)
	}
	return pod, h, nil
}

// readHint reads metadata.name and metadata.namespace if they are strings.
func readHint(js []byte) hint {
	var doc struct {
		Metadata map[string]any `json:"metadata"`
	}
	if sigsjson.UnmarshalCaseSensitivePreserveInts(js, &doc) != nil {
		return hint{}
	}
	name, _ := doc.Metadata["name"].(string)
	namespace, _ := doc.Metadata["namespace"].(string)
	return hint{Name: name, Namespace: namespace}
}

// jsonKind names the kind of a JSON value by its first byte.
func jsonKind(js []byte) string {
	js = bytes.TrimSpace(js)
	if len(js) == 0 {
		return "nothing"
	}
	switch js[0] {
	case '{':
		return "mapping"
	case '[':
		return "list"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	}
	return "number"
}

// yamlLine finds the line numbers in go-yaml's messages ("yaml: line 3: ...",
// "line 3: key "a" already set").
var yamlLine = regexp.MustCompile(`\bline (\d+)\b`)

// yamlError makes a YAML error point into the file rather than into the
// document, and fits it on one line.
func yamlError(err error, firstLine int) error {
	msg := yamlLine.ReplaceAllStringFunc(err.Error(), func(m string) string {
		n, convErr := strconv.Atoi(strings.TrimPrefix(m, "line "))
		if convErr != nil {
			return m
		}
		return "line " + strconv.Itoa(n+firstLine-1)
	})
	return &syntaxError{msg: strings.Join(strings.Fields(msg), " "), err: err}
}

type syntaxError struct {
	msg string
	err error
}

func (e *syntaxError) Error() string { return e.msg }
func (e *syntaxError) Unwrap() error { return e.err }
