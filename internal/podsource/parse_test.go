package podsource

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestSplitDocuments(t *testing.T) {
	type doc struct {
		text string
		line int
	}
	for _, tc := range []struct {
		name string
		in   string
		want []doc
	}{
		{"empty", "", []doc{{"", 1}}},
		{"one", "a: 1\n", []doc{{"a: 1\n", 1}}},
		{"leading separator", "---\na: 1\n", []doc{{"", 1}, {"a: 1\n", 2}}},
		{"two", "a: 1\n---\nb: 2\n", []doc{{"a: 1\n", 1}, {"b: 2\n", 3}}},
		{"separator with comment", "a: 1\n--- # next\nb: 2", []doc{{"a: 1\n", 1}, {"b: 2", 3}}},
		{"trailing separator", "a: 1\n---\n", []doc{{"a: 1\n", 1}, {"", 3}}},
		{"not a separator", "a: |\n  ---x\n----\n", []doc{{"a: |\n  ---x\n----\n", 1}}},
		{"no final newline", "a: 1\n---", []doc{{"a: 1\n", 1}, {"", 3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []doc
			for _, d := range splitDocuments([]byte(tc.in)) {
				got = append(got, doc{string(d.data), d.line})
			}
			if len(got) != len(tc.want) {
				t.Fatalf("splitDocuments(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("document %d = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestContentLine(t *testing.T) {
	d := document{data: []byte("\n# comment\n  \napiVersion: v1\n"), line: 5}
	if got := d.contentLine(); got != 8 {
		t.Errorf("contentLine = %d, want 8", got)
	}
	if got := (document{data: []byte("# only\n"), line: 1}).contentLine(); got != 0 {
		t.Errorf("contentLine of a comment = %d, want 0", got)
	}
}

func TestDecodeDocument(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		line    int
		wantPod bool
		wantErr string
		// wantName is the name hinted at, "" when there is none.
		wantName string
	}{
		{name: "pod", in: podYAML, wantPod: true, wantName: "web"},
		{name: "json pod", in: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},"spec":{"containers":[{"name":"c","image":"i"}]}}`, wantPod: true, wantName: "j"},
		{name: "empty", in: ""},
		{name: "only comments", in: "# nothing here\n\n"},
		{name: "explicit null", in: "null\n"},
		{name: "deployment", in: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n", wantName: "d",
			wantErr: `[apiVersion: Unsupported value: "apps/v1": supported values: "v1", kind: Unsupported value: "Deployment": supported values: "Pod"]`},
		{name: "missing kind", in: "apiVersion: v1\nmetadata: {name: p}\n", wantName: "p", wantErr: `kind: Required value`},
		{name: "missing apiVersion", in: "kind: Pod\n", wantErr: `apiVersion: Required value`},
		{name: "pod list", in: "apiVersion: v1\nkind: PodList\nitems: []\n", wantErr: `kind: Unsupported value: "PodList": supported values: "Pod"`},
		{name: "unknown field", in: podYAML + "    imagePolicy: Always\n", wantName: "web", wantErr: `unknown field "spec.containers[0].imagePolicy"`},
		{name: "unknown fields", in: podYAML + "  hostNet: true\n  foo: 1\n", wantName: "web", wantErr: `[unknown field "spec.foo", unknown field "spec.hostNet"]`},
		{name: "wrong case", in: "apiVersion: v1\nkind: Pod\nmetadata: {Name: x}\n", wantErr: `unknown field "metadata.Name"`},
		{name: "duplicate key", in: "apiVersion: v1\nkind: Pod\nkind: Pod\n", line: 10, wantErr: `yaml: unmarshal errors: line 12: key "kind" already set in map`},
		{name: "broken yaml", in: "apiVersion: v1\nkind: Pod\nmetadata:\n  name: [\n", line: 7, wantErr: `yaml: line 10: did not find expected node content`},
		{name: "tab indent", in: "apiVersion: v1\n\tkind: Pod\n", wantErr: `yaml: line 2: found a tab character that violates indentation`},
		{name: "wrong type", in: "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i, env: [{name: A, value: 1}]}]}\n", wantName: "p",
			wantErr: `json: cannot unmarshal number into Go struct field EnvVar.spec.containers.env.value of type string`},
		{name: "a string", in: "hello world\n", wantErr: `expected a Pod, found a string`},
		{name: "a list", in: "- a\n- b\n", wantErr: `expected a Pod, found a list`},
		{name: "metadata not a mapping", in: "apiVersion: v1\nkind: Pod\nmetadata: web\n",
			wantErr: `json: cannot unmarshal string into Go struct field Pod.metadata of type v1.ObjectMeta`},
		{name: "apiVersion not a string", in: "apiVersion: 1\nkind: Pod\nmetadata: {name: web}\n", wantName: "web",
			wantErr: `json: cannot unmarshal number into Go struct field TypeMeta.apiVersion of type string`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line := tc.line
			if line == 0 {
				line = 1
			}
			pod, h, err := decodeDocument(document{data: []byte(tc.in), line: line})
			if (pod != nil) != tc.wantPod {
				t.Errorf("pod = %v, want one: %v", pod, tc.wantPod)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Errorf("error\n %v\nwant\n %s", err, tc.wantErr)
			}
			if h.Name != tc.wantName {
				t.Errorf("hinted name %q, want %q", h.Name, tc.wantName)
			}
		})
	}
}

func TestDecodeDocumentKindErrorIsFieldErrors(t *testing.T) {
	_, _, err := decodeDocument(document{data: []byte("apiVersion: v1\nkind: Service\n"), line: 1})
	var fe FieldErrors
	if !errors.As(err, &fe) || len(fe) != 1 || fe[0].Field != "kind" || fe[0].Type != field.ErrorTypeNotSupported {
		t.Errorf("error %#v, want FieldErrors naming kind", err)
	}
}
