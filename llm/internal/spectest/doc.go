// Package spectest holds the test helpers the llm packages share for the
// llm-provider conformance fixtures of the OpenArmature spec: locating
// the spec checkout, reading the fixture files, and comparing JSON the
// way the fixtures state it ("*" matches any non-empty string). It is
// imported only by tests.
//
// Its functions keep no state and are safe for concurrent use.
//
// Usage:
//
//	for _, f := range spectest.Fixtures(t) {
//		var ff fixtureFile
//		if err := yaml.Unmarshal(f.Data, &ff); err != nil {
//			t.Fatalf("%s: %v", f.Path, err)
//		}
//		...
//		if err := spectest.MatchJSON("wire", want, got); err != nil {
//			t.Error(err)
//		}
//	}
package spectest
