//go:build !unix

package agent

import "github.com/modelcontextprotocol/go-sdk/mcp"

// groupCommand returns ct as it is: outside unix there are no process
// groups to start a stdio server in, and Close ends only the command's
// own process (the SDK's behaviour); a server started through a launcher
// may outlive it.
func groupCommand(ct *mcp.CommandTransport) mcp.Transport { return ct }
