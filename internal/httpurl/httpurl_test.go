package httpurl

import (
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"https://api.example.com/v1", true},
		{"http://127.0.0.1:8080", true},
		{"http://[::1]:8080/x", true},
		{"http://127.0.0.1:1/v1/%zz", false},
		{"http://[::1", false},
		{"ftp://host/", false},
		{"http://", false},
		{"http:opaque", false},
		{"/relative", false},
		{"", false},
	} {
		if got := Valid(tc.in); got != tc.want {
			t.Errorf("Valid(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestRedactHidesPasswords(t *testing.T) {
	const pw = "S3CRET"
	for _, in := range []string{
		"http://user:" + pw + "@127.0.0.1:1/",
		"http://user:" + pw + "@127.0.0.1:1/%zz",
		"http://user:" + pw + "@[::1",
		"ftp://user:" + pw + "@host",
		"user:" + pw + "@host",
	} {
		if out := Redact(in); strings.Contains(out, pw) {
			t.Errorf("Redact(%q) = %q", in, out)
		}
	}
	if out := Redact("http://127.0.0.1:8080/x"); out != "http://127.0.0.1:8080/x" {
		t.Errorf("a URL without a password changed: %q", out)
	}
}

func FuzzRedact(f *testing.F) {
	f.Add("http://u:p@h/", "p")
	f.Fuzz(func(t *testing.T, prefix, secret string) {
		if secret == "" || strings.ContainsAny(secret, "@/?#[]:%") || strings.ContainsAny(prefix, ":@/") {
			return
		}
		in := prefix + "://user:" + secret + "@host/%zz"
		if strings.Contains(Redact(in), ":"+secret+"@") {
			t.Fatalf("Redact(%q) kept the password", in)
		}
	})
}
