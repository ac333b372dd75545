package chatcli_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/armature-go/armature/internal/chatcli"
)

// A server that answers POST /v1/sessions without a usable session id
// ({}, an empty id, "..") created nothing the client can talk to:
// CreateSession fails ErrInvalidSessionID, rather than hand back an id
// the chat loop then announced ("new session  on …") before its first
// request failed.
func TestCreateSessionWithoutAnIDFails(t *testing.T) {
	for _, body := range []string{`{}`, `{"session_id": ""}`, `{"session_id": ".."}`} {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(body))
		}))
		c, err := chatcli.NewClient(chatcli.ClientConfig{Server: ts.URL})
		if err != nil {
			t.Fatal(err)
		}
		if s, err := c.CreateSession(context.Background(), ""); !errors.Is(err, chatcli.ErrInvalidSessionID) {
			t.Errorf("%s: CreateSession = %+v, %v; want ErrInvalidSessionID", body, s, err)
		}
		ts.Close()
	}
}
