package cli

import (
	"context"
	"flag"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/session"
)

// tokenMessages is the text of parseTokens's errors: a field of the
// input found in an error is an echo unless the text itself holds it.
const tokenMessages = "serve: token : a token must be secret:tenant with a secret of at least 16 bytes " +
	"the secret must be UTF-8 without control characters or surrounding whitespace (an Authorization header could not carry it) " +
	"the tenant must be 1-128 bytes of [A-Za-z0-9._:-], other than . and .. its secret is another tenant's too 0123456789"

// demoServerConfig is a server configuration serving the built-in demo
// agent, to check tokens against.
func demoServerConfig(tb testing.TB) server.Config {
	ws, err := loadWorkspace("")
	if err != nil {
		tb.Fatal(err)
	}
	aw, err := ws.adapterWorkspace()
	if err != nil {
		tb.Fatal(err)
	}
	reg, err := ws.adapters(nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	a, err := reg.Build(context.Background(), adapter.FactoryRequest{Workspace: aw, Agent: aw.Agents[0]})
	if err != nil {
		tb.Fatal(err)
	}
	store := session.NewMemoryStore(session.MemoryConfig{})
	served, err := server.NewAdapterAgent(server.AdapterAgentConfig{Adapter: a, Agent: aw.Agents[0], Workspace: aw, Sessions: store})
	if err != nil {
		tb.Fatal(err)
	}
	return server.Config{Sessions: store, Addr: "127.0.0.1:0", Agents: []*server.Agent{served}}
}

// FuzzParseTokens: any --tokens (ARMATURE_TOKENS) value is refused, or
// gives tokens the server accepts and an Authorization header can
// carry; no error echoes a secret (nor a tenant, which may be the secret
// of a pair written the wrong way round).
func FuzzParseTokens(f *testing.F) {
	for _, s := range []string{
		" s3cret-token-0001:acme , other-secret-0002:globex",
		"aaaaaaaaaaaaaaaaaaaa:a,bbbbbbbbbbbbbbbbbbbb:b",
		"nocolon", ":tenant", "secret:", "",
		// Found by reading: each was accepted, and refused by the server
		// only once the store opened, or could never authenticate.
		"short:acme",
		"0123456789abcdef:bad tenant",
		"0123456789abcdef :acme",
		"0123456789abcdef\x01:acme",
		"0123456789abcdef:acme,0123456789abcdef:globex",
		"acme:0123456789abcdefghij",
		"0123456789abcdef:acme,0123456789abcdef:acme",
		"0123456789abcdef:org:team",
		// Found by FuzzParseTokens: the server refuses these tenants.
		"0000000000000000:.",
		"0000000000000000:..",
	} {
		f.Add(s)
	}
	cfg := demoServerConfig(f)
	f.Fuzz(func(t *testing.T, s string) {
		toks, err := parseTokens(s)
		if err != nil {
			msg := err.Error()
			for part := range strings.SplitSeq(s, ",") {
				for field := range strings.SplitSeq(part, ":") {
					for _, v := range []string{field, strings.TrimSpace(field)} {
						if len(v) >= 4 && strings.Contains(msg, v) && !strings.Contains(tokenMessages, v) {
							t.Fatalf("parseTokens(%q): the error echoes %q: %v", s, v, err)
						}
					}
				}
			}
			return
		}
		c := cfg
		c.Tokens = toks
		if err := c.Validate(); err != nil {
			t.Fatalf("parseTokens(%q) = %d tokens the server refuses: %v", s, len(toks), err)
		}
		for _, tok := range toks {
			if secret, ok := bearerSent("Bearer " + tok.Secret); !ok || secret != tok.Secret {
				t.Fatalf("parseTokens(%q): secret %q arrives as %q, %v", s, tok.Secret, secret, ok)
			}
		}
	})
}

// bearerSent is the token a server reads from an Authorization header
// value h as sent: HTTP trims surrounding whitespace and refuses control
// characters other than tab (httpguts.ValidHeaderFieldValue), then the
// server takes what follows "Bearer " (server.bearerToken).
func bearerSent(h string) (string, bool) {
	if strings.ContainsFunc(h, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
		return "", false
	}
	h = strings.Trim(h, " \t")
	_, rest, ok := strings.Cut(h, " ")
	rest = strings.TrimLeft(rest, " ")
	return rest, ok && rest != ""
}

// FuzzEnvDefaults: an environment variable giving a flag its default is
// read without a panic, refused exactly when the flag would refuse the
// same value, and read as the flag reads it.
func FuzzEnvDefaults(f *testing.F) {
	for _, s := range []string{"", "0", "1073741824", "512MiB", "1GiB", " 64 KB ", "2GB", "10B", "-1", "1.5GiB", "lots",
		"9223372036854775807GiB", "90d", "72h", "15s", "-5m", "0x10", "1_000", "+7", "08", "9223372036854775808"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if strings.ContainsRune(v, 0) {
			return // no environment variable holds a NUL
		}
		const key = "ARMATURE_FUZZ2_ENV"
		t.Setenv(key, v)
		fs := flag.NewFlagSet("fuzz", flag.ContinueOnError)
		fs.SetOutput(io.Discard)

		e := &envDefaults{}
		n := e.int(key, 42)
		var fn int
		fs.IntVar(&fn, "n", 0, "")
		ferr := fs.Set("n", v)
		if v == "" {
			if e.err != nil || n != 42 {
				t.Fatalf("unset: %d, %v", n, e.err)
			}
		} else if (e.err == nil) != (ferr == nil) || ferr == nil && n != fn {
			t.Fatalf("int %q: env %d, %v; flag %d, %v", v, n, e.err, fn, ferr)
		}

		e = &envDefaults{}
		b := e.bytes(key, 7)
		var fb byteSize
		ferr = fb.Set(v)
		if v == "" {
			if e.err != nil || b != 7 {
				t.Fatalf("unset: %d, %v", b, e.err)
			}
		} else {
			if (e.err == nil) != (ferr == nil) || ferr == nil && b != fb {
				t.Fatalf("bytes %q: env %d, %v; flag %d, %v", v, b, e.err, fb, ferr)
			}
			if ferr == nil {
				if back, err := parseBytes(strconv.FormatInt(int64(b), 10)); b < 0 || err != nil || back != int64(b) {
					t.Fatalf("bytes %q = %d, read back as %d, %v", v, b, back, err)
				}
			}
		}

		e = &envDefaults{}
		d := e.duration(key, time.Second)
		var fd time.Duration
		fs.DurationVar(&fd, "d", 0, "")
		ferr = fs.Set("d", v)
		if v != "" && ((e.err == nil) != (ferr == nil) || ferr == nil && d != fd) {
			t.Fatalf("duration %q: env %v, %v; flag %v, %v", v, d, e.err, fd, ferr)
		}
	})
}
