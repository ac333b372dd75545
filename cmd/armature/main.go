// Command armature is the Armature command-line tool.
//
// Usage:
//
//	armature serve [flags]     run the HTTP server (see armature serve -h)
//	armature chat [flags]      chat with a server's agent in the terminal (see armature chat -h)
//	armature example [-json]   run a small example graph and trace its events
//	armature version           print the version, module version and VCS commit
//	armature help              print the command list (also armature, -h, --help)
//
// The command is package internal/cli; a program that serves agents of
// other backends is the same three lines with its adapter factories
// registered (see adapters/adk and adapters/eino).
package main

import (
	"os"

	"github.com/armature-go/armature/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], cli.Options{})) }
