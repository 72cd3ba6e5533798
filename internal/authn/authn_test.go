package authn

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

func TestParseTokens(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		want    map[string]User
		wantErr []string
	}{
		{
			name: "users with and without groups",
			file: "# callers\ns3cret,alice,1001,\"ops,dev\"\n tok2, bob ,1002\n",
			want: map[string]User{
				"s3cret": {Name: "alice", UID: "1001", Groups: []string{"ops", "dev"}, Method: "token"},
				"tok2":   {Name: "bob", UID: "1002", Method: "token"},
			},
		},
		{
			name:    "every bad line is named",
			file:    "a,alice,1\nshort,line\n,carol,3\nd,,4\na,dave,5\n",
			wantErr: []string{"line 2: want token,user,uid[,groups], got 2 fields", "line 3: the token is empty", "line 4: the user name is empty", `line 5: the token of "dave" is used on an earlier line`},
		},
		{name: "empty", file: "# nothing\n", wantErr: []string{"no tokens"}},
		{name: "unbalanced quote", file: "a,\"alice,1\n", wantErr: []string{"line 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseTokens(strings.NewReader(tt.file))
			if tt.wantErr != nil {
				if err == nil {
					t.Fatal("no error")
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			a := New(false, got)
			for token, want := range tt.want {
				r := httptest.NewRequest("GET", "/pods", nil)
				r.Header.Set("Authorization", "Bearer "+token)
				u, ok := a.Authenticate(r)
				if !ok || !reflect.DeepEqual(u, want) {
					t.Errorf("token %q: %+v %v, want %+v", token, u, ok, want)
				}
			}
		})
	}
}

func TestRequire(t *testing.T) {
	tokens, err := parseTokens(strings.NewReader("good,alice,1\n"))
	if err != nil {
		t.Fatal(err)
	}
	verified := &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{
		{Subject: pkix.Name{CommonName: "bob", Organization: []string{"admins"}}},
	}}}
	unverified := &tls.ConnectionState{PeerCertificates: []*x509.Certificate{{Subject: pkix.Name{CommonName: "mallory"}}}}
	tests := []struct {
		name     string
		x509     bool
		header   string
		tls      *tls.ConnectionState
		wantCode int
		wantUser string
	}{
		{name: "no credentials", x509: true, wantCode: 401},
		{name: "a good token", header: "Bearer good", wantCode: 200, wantUser: "alice"},
		{name: "the scheme is case-insensitive", header: "bearer good", wantCode: 200, wantUser: "alice"},
		{name: "a wrong token", header: "Bearer bad", wantCode: 401},
		{name: "basic auth", header: "Basic Z29vZA==", wantCode: 401},
		{name: "an empty bearer", header: "Bearer ", wantCode: 401},
		{name: "a verified client certificate", x509: true, tls: verified, wantCode: 200, wantUser: "bob"},
		{name: "client certificates not trusted", tls: verified, wantCode: 401},
		{name: "an unverified client certificate", x509: true, tls: unverified, wantCode: 401},
		{name: "a bad certificate does not spoil a good token", x509: true, tls: unverified, header: "Bearer good", wantCode: 200, wantUser: "alice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ran bool
			var user User
			h := New(tt.x509, tokens).Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ran = true
				user, _ = UserFrom(r.Context())
			}))
			r := httptest.NewRequest("GET", "/exec/default/web/app?command=id", nil)
			r.TLS = tt.tls
			if tt.header != "" {
				r.Header.Set("Authorization", tt.header)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.wantCode {
				t.Errorf("code %d, want %d", w.Code, tt.wantCode)
			}
			if ran != (tt.wantCode == 200) {
				t.Errorf("handler ran: %v", ran)
			}
			if user.Name != tt.wantUser {
				t.Errorf("user %q, want %q", user.Name, tt.wantUser)
			}
			if tt.wantCode == 401 && w.Header().Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
}
