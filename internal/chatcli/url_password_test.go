package chatcli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armature-go/armature/internal/chatcli"
)

// TestValidServerURLPasswordNeitherShownNorStored: a valid server URL
// that carries a password (http://user:pw@host, behind a reverse proxy
// with basic auth) is shown with the password masked on every session
// start ("new session X on http://user:xxxxx@host"), and the state file
// keys the server's entry by that masked form. Before, the password was
// printed, and written to the state file, verbatim.
func TestValidServerURLPasswordNeitherShownNorStored(t *testing.T) {
	ts := newDemoServer(t)
	const pw = "S3CRETPW-attack58"
	url := strings.Replace(ts.URL, "http://", "http://user:"+pw+"@", 1)
	state := filepath.Join(t.TempDir(), "chat.json")
	s := startChat(t, chatcli.Config{Client: newClient(t, url, ""), StatePath: state})
	s.waitFor("you> ")
	s.send("hello")
	s.waitFor("you> ")
	s.quit()
	if out := s.out.String(); strings.Contains(out, pw) {
		t.Errorf("the server URL's password is printed:\n%s", out)
	}
	b, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), pw) || !strings.Contains(string(b), "user:xxxxx@") {
		t.Errorf("state file: %s", b)
	}
}
