package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "armature-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	store, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "armature.db")})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close(ctx)

	// First turn: create the record.
	w, err := store.Save(ctx, session.SaveRequest{
		SessionID: "user-42", SchemaVersion: "v1",
		State: map[string]json.RawMessage{"messages": json.RawMessage(`["hi"]`)},
	})
	if err != nil {
		log.Fatal(err)
	}
	// Next turn: write only the new message, conditional on the version.
	w, err = store.Append(ctx, session.AppendRequest{
		SessionID: "user-42", ExpectedVersion: w.Version,
		Append: map[string][]json.RawMessage{"messages": {json.RawMessage(`"hello!"`)}},
	})
	if err != nil {
		log.Fatal(err)
	}
	rec, err := store.Load(ctx, session.LoadRequest{SessionID: "user-42"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rec.Version, string(rec.State["messages"]))
	// A caller holding version 2 is current: nothing is read.
	_, err = store.Load(ctx, session.LoadRequest{SessionID: "user-42", IfVersionNot: w.Version})
	fmt.Println(err)
	// Output:
	// 2 ["hi","hello!"]
	// sqlite: load: session: not modified
}
